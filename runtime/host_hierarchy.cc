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
  std::vector<std::string> hostOfRank;
  for (int r = 0; r < data.size(); ++r) {
    const std::byte* record = all.data() + r * kRecordBytes;
    (record[0] == std::byte{1} ? out.on : out.off).push_back(r);
    hostOfRank.emplace_back(reinterpret_cast<const char*>(record + 1));
  }
  out.layout = HostLayout::of(hostOfRank);
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
  const std::vector<int>& mine = layout.localRanks(data.rank());
  int host = static_cast<int>(&mine - layout.ranksOf.data());
  auto local = connectLocal(config, data, store,
                            detail::concat(scopePrefix, "/hierarchy/host/", host), mine, waits);
  bool sharedMemory = local->progress() != data.progress();
  auto crossComm = data.subset(layout.crossRanks(data.rank()));
  if (data.rank() == 0)
    log->info("hierarchical allreduce: {} hosts of {} ranks; within a host over {}, across "
              "hosts over TCP", layout.hosts.size(), mine.size(),
              sharedMemory ? "shared memory" : "TCP");
  data.setHierarchy(std::move(local), std::move(crossComm));
}

}  // namespace hvd::runtime
