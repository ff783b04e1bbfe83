#include "runtime/host_hierarchy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/operations.h"
#include "collectives/rendezvous/prefix_store.h"
#include "collectives/transport/shm/shm_device.h"
#include "common/format.h"
#include "common/logging.h"

namespace hvd::runtime {
namespace {

using collectives::Comm;

// Where each rank runs, as the ranks told each other: hosts in the order of their first rank,
// each host's ranks in rank order.
struct HostLayout {
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranksOf;  // per host

  int hostOf(int rank) const {
    for (std::size_t h = 0; h < ranksOf.size(); ++h)
      if (std::find(ranksOf[h].begin(), ranksOf[h].end(), rank) != ranksOf[h].end())
        return static_cast<int>(h);
    return -1;
  }
  bool even() const {  // as many ranks on every host
    for (const auto& ranks : ranksOf)
      if (ranks.size() != ranksOf.front().size()) return false;
    return true;
  }
  std::string text() const {  // "a: 2, b: 2"
    std::string out;
    for (std::size_t h = 0; h < hosts.size(); ++h)
      out += detail::concat(h ? ", " : "", hosts[h], ": ", ranksOf[h].size());
    return out;
  }
};

// One rank's record in the exchange: its setting, then its host name, NUL-padded.
constexpr std::size_t kRecordBytes = 256;

struct Exchanged {
  HostLayout layout;
  std::vector<int> on, off;  // ranks by HVD_HIERARCHICAL_ALLREDUCE
};

Exchanged exchange(const Config& config, Comm& data) {
  const std::string& host = config.topology.hostname;
  if (host.size() >= kRecordBytes)
    throw InvalidArgument(detail::concat("HVD_HOSTNAME of rank ", config.topology.rank, " is ",
                                         host.size(), " characters long; at most ",
                                         kRecordBytes - 1, " are supported"));
  std::vector<std::byte> mine(kRecordBytes);
  mine[0] = std::byte{config.hierarchicalAllreduce ? uint8_t{1} : uint8_t{0}};
  std::memcpy(mine.data() + 1, host.data(), host.size());
  std::vector<std::byte> all;
  collectives::allgather(
      data, {mine.data(), collectives::DType::UInt8, {int64_t(kRecordBytes)}},
      [&](const std::vector<int64_t>& shape) -> void* {
        all.resize(static_cast<std::size_t>(shape[0]));
        return all.data();
      });
  Exchanged out;
  for (int r = 0; r < data.size(); ++r) {
    const std::byte* record = all.data() + r * kRecordBytes;
    (record[0] == std::byte{1} ? out.on : out.off).push_back(r);
    std::string name(reinterpret_cast<const char*>(record + 1));
    auto it = std::find(out.layout.hosts.begin(), out.layout.hosts.end(), name);
    if (it == out.layout.hosts.end()) {
      out.layout.hosts.push_back(name);
      out.layout.ranksOf.emplace_back();
      it = out.layout.hosts.end() - 1;
    }
    out.layout.ranksOf[it - out.layout.hosts.begin()].push_back(r);
  }
  return out;
}

// The ranks of this host over shared memory, or over their links in `data` when that is not
// possible. Shared memory's fallback is decided among this host's ranks alone.
std::unique_ptr<Comm> connectLocal(const Config& config, Comm& data, rendezvous::Store& store,
                                   const std::string& scope, const std::vector<int>& ranks,
                                   collectives::tcp::WaitPolicy waits) {
  auto log = log::logger("runtime");
  if (config.transport != Transport::Tcp && ranks.size() > 1) {
    rendezvous::PrefixStore scoped(scope, store);
    int localRank = static_cast<int>(std::find(ranks.begin(), ranks.end(), data.rank()) -
                                     ranks.begin());
    try {
      auto device = collectives::shm::ShmDevice::create(
          {config.shmBufferBytes, waits.smallSpin, waits.largeSpin,
           collectives::shm::jobSegmentPrefix(config.jobId)});
      return device->connectAll(localRank, static_cast<int>(ranks.size()), scoped,
                                config.startTimeout, config.opTimeout);
    } catch (const collectives::shm::ShmUnavailable& e) {
      log->warn("hierarchical allreduce: {} (the ranks of this host use TCP)", e.what());
    }
  }
  return data.subset(ranks);
}

}  // namespace

void attachHostHierarchy(const Config& config, Comm& data, rendezvous::Store& store,
                         const std::string& scopePrefix, collectives::tcp::WaitPolicy waits) {
  Exchanged x = exchange(config, data);
  if (!x.on.empty() && !x.off.empty())
    throw InvalidArgument(detail::concat(
        "HVD_HIERARCHICAL_ALLREDUCE differs between ranks: on for ranks ", rankSet(x.on),
        ", off for ranks ", rankSet(x.off), " (every rank must run the same allreduce; set it "
        "for the whole job, e.g. hvdrun --hierarchical-allreduce)"));
  if (x.off.size() == static_cast<std::size_t>(data.size())) return;
  const HostLayout& layout = x.layout;
  auto log = log::logger("runtime");
  if (layout.hosts.size() == 1) return;  // one host: the flat allreduce is already local
  if (!layout.even()) {
    if (data.rank() == 0)
      log->warn("HVD_HIERARCHICAL_ALLREDUCE needs as many ranks on every host (ranks per "
                "host: {}); allreduce of host memory runs flat", layout.text());
    return;
  }
  int host = layout.hostOf(data.rank());
  const std::vector<int>& mine = layout.ranksOf[host];
  std::size_t index = std::find(mine.begin(), mine.end(), data.rank()) - mine.begin();
  std::vector<int> cross;
  for (const auto& ranks : layout.ranksOf) cross.push_back(ranks[index]);
  std::sort(cross.begin(), cross.end());
  auto local = connectLocal(config, data, store,
                            detail::concat(scopePrefix, "/hierarchy/host/", host), mine, waits);
  bool sharedMemory = local->progress() != data.progress();
  auto crossComm = data.subset(cross);
  if (data.rank() == 0)
    log->info("hierarchical allreduce: {} hosts of {} ranks; within a host over {}, across "
              "hosts over TCP", layout.hosts.size(), mine.size(),
              sharedMemory ? "shared memory" : "TCP");
  data.setHierarchy(std::move(local), std::move(crossComm));
}

}  // namespace hvd::runtime
