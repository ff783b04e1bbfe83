#include "runtime/host_hierarchy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include "collectives/operations.h"
#include "collectives/rendezvous/prefix_store.h"
#include "common/format.h"
#include "common/logging.h"
#include "common/param_docs.h"
#include "runtime/transport_table.h"

namespace hvd::runtime {
namespace {

using collectives::Comm;

// The settings that attach a hierarchy, in the order of their flags in a rank's record.
struct Setting {
  const char* collective;
  params::ParamId param;
  bool Config::*value;
  const std::string& variable() const { return params::envName(param); }
  std::string flag() const { return params::flagSpellings(params::spec(param).flag).front(); }
};
constexpr Setting kSettings[] = {
    {"allreduce", params::ParamId::HierarchicalAllreduce, &Config::hierarchicalAllreduce},
    {"allgather", params::ParamId::HierarchicalAllgather, &Config::hierarchicalAllgather}};
constexpr std::size_t kSettingCount = std::size(kSettings);

// What picks the algorithm of an allreduce across hosts, which must be the same on every rank:
// ranks that chose differently would send messages the others do not expect. Each is a number
// in a rank's record (the model as a hash of its JSON, which a file that differs between hosts
// changes).
struct Choice {
  params::ParamId param;
  const char* what;  // of the variable's value, when not the value itself
  uint64_t (*of)(const Config&);
  std::string variable() const { return params::envName(param) + what; }
};
const Choice kChoices[] = {
    {params::ParamId::AllreduceAlgorithm, "",
     [](const Config& c) { return static_cast<uint64_t>(c.engine.executor.allreduceAlgorithm); }},
    {params::ParamId::AllreduceRingThreshold, "",
     [](const Config& c) { return static_cast<uint64_t>(c.engine.executor.ringThresholdBytes); }},
    {params::ParamId::NetworkModel, " (the model's contents)", [](const Config& c) {
       // The file's contents: ranks per host is the job's, agreed in this exchange.
       collectives::NetworkModel m = *c.networkModel;
       m.ranksPerHost = 1;
       return static_cast<uint64_t>(std::hash<std::string>{}(m.toJson()));
     }}};
constexpr std::size_t kChoiceCount = std::size(kChoices);

// One rank's record in the exchange: a byte per setting, a number per choice, its host's
// online CPUs, then its host name, NUL-padded.
constexpr std::size_t kRecordBytes = 256;
constexpr std::size_t kCoresAt = kSettingCount + kChoiceCount * sizeof(uint64_t);
constexpr std::size_t kHostAt = kCoresAt + sizeof(uint32_t);

struct Exchanged {
  HostLayout layout;
  std::vector<int> on[kSettingCount], off[kSettingCount];  // ranks by each setting
  int fewestCores = 0;                                     // of any rank's host
  std::vector<std::string> hostOfRank;
};

// Throws InvalidArgument naming the ranks on each side when a choice differs between ranks.
void checkChoicesAgree(const std::vector<std::byte>& all, int size) {
  for (std::size_t k = 0; k < kChoiceCount; ++k) {
    auto valueOf = [&](int r) {
      uint64_t v;
      std::memcpy(&v, all.data() + r * kRecordBytes + kSettingCount + k * sizeof(uint64_t),
                  sizeof v);
      return v;
    };
    std::vector<int> same, other;
    for (int r = 0; r < size; ++r) (valueOf(r) == valueOf(0) ? same : other).push_back(r);
    if (!other.empty())
      throw InvalidArgument(detail::concat(
          kChoices[k].variable(), " differs between ranks: ranks ", rankSet(same),
          " have rank 0's, ranks ", rankSet(other),
          " another (every rank must choose the same "
          "allreduce algorithm; set it for the whole job, e.g. hvdrun -x, and give every host "
          "the same model file)"));
  }
}

Exchanged exchange(const Config& config, Comm& data) {
  const std::string& host = config.topology.hostname;
  if (host.size() >= kRecordBytes - kHostAt)
    throw InvalidArgument(detail::concat("HVD_HOSTNAME of rank ", config.topology.rank, " is ",
                                         host.size(), " characters long; at most ",
                                         kRecordBytes - kHostAt - 1, " are supported"));
  std::vector<std::byte> mine(kRecordBytes);
  for (std::size_t k = 0; k < kSettingCount; ++k)
    mine[k] = std::byte{config.*kSettings[k].value ? uint8_t{1} : uint8_t{0}};
  for (std::size_t k = 0; k < kChoiceCount; ++k) {
    uint64_t v = kChoices[k].of(config);
    std::memcpy(mine.data() + kSettingCount + k * sizeof v, &v, sizeof v);
  }
  auto cores = static_cast<uint32_t>(std::max(0L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  std::memcpy(mine.data() + kCoresAt, &cores, sizeof cores);
  std::memcpy(mine.data() + kHostAt, host.data(), host.size());
  std::vector<std::byte> all;
  collectives::allgather(data, {mine.data(), collectives::DType::UInt8, {int64_t(kRecordBytes)}},
                         [&](const std::vector<int64_t>& shape) -> void* {
                           all.resize(static_cast<std::size_t>(shape[0]));
                           return all.data();
                         });
  checkChoicesAgree(all, data.size());
  Exchanged out;
  std::vector<std::string> hostOfRank;
  for (int r = 0; r < data.size(); ++r) {
    const std::byte* record = all.data() + r * kRecordBytes;
    for (std::size_t k = 0; k < kSettingCount; ++k)
      (record[k] == std::byte{1} ? out.on[k] : out.off[k]).push_back(r);
    hostOfRank.emplace_back(reinterpret_cast<const char*>(record + kHostAt));
    uint32_t theirs;
    std::memcpy(&theirs, record + kCoresAt, sizeof theirs);
    if (r == 0 || static_cast<int>(theirs) < out.fewestCores)
      out.fewestCores = static_cast<int>(theirs);
  }
  out.layout = HostLayout::of(hostOfRank);
  out.hostOfRank = std::move(hostOfRank);
  return out;
}

// The ranks of this host, through the transport table: over shared memory, or over their
// links in `data` when that is not possible. Shared memory's fallback is decided among this
// host's ranks alone.
Linked connectLocal(const Config& config, Comm& data, rendezvous::Store& store,
                    const std::string& scope, const std::vector<int>& ranks,
                    collectives::WaitPolicy waits, const std::string& what,
                    const std::shared_ptr<log::Logs>& logs) {
  auto log = logs->get("runtime");
  rendezvous::PrefixStore scoped(scope, store);
  int localRank =
      static_cast<int>(std::find(ranks.begin(), ranks.end(), data.rank()) - ranks.begin());
  LinkSet set{.rank = localRank, .size = static_cast<int>(ranks.size()), .sameHost = true};
  LinkSetup setup{
      .store = &scoped, .waits = waits, .existing = &data, .ranks = ranks, .logs = logs};
  return TransportChooser().connect(
      config, set, setup, [&](const std::string& reason, const TransportEntry& next) {
        // The same reason on each of the host's ranks: its first warns, the others log it.
        log->log(localRank == 0 ? spdlog::level::warn : spdlog::level::info,
                 "hierarchical {}: {} (the ranks of this host use {})", what, reason, next.label);
      });
}

}  // namespace

HostShape attachHostHierarchy(const Config& config, Comm& data, rendezvous::Store& store,
                              const std::string& scopePrefix, collectives::WaitPolicy waits,
                              const std::shared_ptr<log::Logs>& logs) {
  Exchanged x = exchange(config, data);
  const int ranksPerHost = x.layout.even() ? static_cast<int>(x.layout.ranksOf.front().size()) : 1;
  const HostShape shape{ranksPerHost, x.fewestCores, x.hostOfRank, x.layout.even()};
  bool everywhere[kSettingCount];
  std::string what, variables;
  for (std::size_t k = 0; k < kSettingCount; ++k) {
    if (!x.on[k].empty() && !x.off[k].empty())
      throw InvalidArgument(detail::concat(kSettings[k].variable(),
                                           " differs between ranks: on for ranks ",
                                           rankSet(x.on[k]), ", off for ranks ", rankSet(x.off[k]),
                                           " (every rank must run the same algorithm; set "
                                           "it for the whole job, e.g. hvdrun ",
                                           kSettings[k].flag(), ")"));
    everywhere[k] = x.off[k].empty();
    if (!everywhere[k]) continue;
    what += (what.empty() ? "" : " and ") + std::string(kSettings[k].collective);
    variables += (variables.empty() ? "" : " and ") + kSettings[k].variable();
  }
  const HostLayout& layout = x.layout;
  // Left to Auto, the cost model chooses the staged allreduce size by size, where a job has
  // several hosts of several ranks each; a named algorithm is a flat one.
  const bool byModel =
      !everywhere[0] &&
      config.engine.executor.allreduceAlgorithm == collectives::AllreduceAlgorithm::Auto &&
      layout.hosts.size() > 1 && layout.even() && ranksPerHost > 1;
  if (what.empty() && !byModel) return shape;
  auto log = logs->get("runtime");
  if (layout.hosts.size() == 1) return shape;  // one host: the flat ones are already local
  if (!layout.even()) {
    if (data.rank() == 0)
      log->warn(
          "hierarchical {} ({}) needs as many ranks on every host (ranks per host: {}); "
          "it runs flat",
          what, variables, layout.text());
    return shape;
  }
  if (what.empty()) what = "allreduce (chosen by the cost model)";
  const std::vector<int>& mine = layout.localRanks(data.rank());
  int host = static_cast<int>(&mine - layout.ranksOf.data());
  Linked local =
      connectLocal(config, data, store, detail::concat(scopePrefix, "/hierarchy/host/", host), mine,
                   waits, what, logs);
  bool sharedMemory = local.transport == Transport::Shm;
  auto crossComm = data.subset(layout.crossRanks(data.rank()));
  if (data.rank() == 0) {
    log->info(
        "hierarchical {}: {} hosts of {} ranks; within a host over {}, across hosts over "
        "TCP",
        what, layout.hosts.size(), mine.size(), sharedMemory ? "shared memory" : "TCP");
    if (byModel)
      log->info(
          "allreduce across hosts: the cost model chooses, size by size, between the flat "
          "algorithms and the hierarchical form (HVD_ALLREDUCE_ALGORITHM=<name> or "
          "--allreduce-algorithm forces a flat one; --hierarchical-allreduce the staged "
          "one)");
  }
  data.setHierarchy({std::move(local.comm), std::move(crossComm), layout.ranksOf, everywhere[0],
                     everywhere[1], byModel});
  return shape;
}

}  // namespace hvd::runtime
