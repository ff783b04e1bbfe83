// How a rank's data links wait for a message (collectives/transport/wait_policy.h), decided from
// its Config, what it is for and its host's CPUs. Pure, but for the log line it may write.
#pragma once

#include <atomic>
#include <memory>

#include "collectives/transport/wait_policy.h"
#include "common/logging.h"
#include "runtime/config.h"

namespace hvd::runtime {

// The data links block in a receive after polling, and fail a transfer whose peer is seen
// stopped at the liveness timeout. For the engine (`blockedCallers` set: the count of callers
// blocked on a result) they poll small messages for config.engine.spinTime, and large ones only
// while a caller is blocked, since polling through a large transfer while the training step runs
// would take CPU from it; a transfer that stops moving is reported like a stalled negotiation
// when config.engine.coordinator.stallCheck. For collectives called directly (no blockedCallers)
// the caller has nothing else to do, so they poll long (directCollectiveSpins). `sharing`: the
// ranks that take turns on this rank's CPUs, and those CPUs. Rank 0 logs the choice when the
// ranks outnumber the CPUs.
struct CpuSharing {
  int ranks = 1;  // this host's (config.topology.localSize), or its kernel's where more
  int cpus = 0;   // 0: a CPU each, or unknown
  bool acrossHostNames = false;  // ranks of other host names on this kernel are among `ranks`
};
collectives::WaitPolicy dataLinkWaits(const Config& config, const CpuSharing& sharing,
                                      std::shared_ptr<std::atomic<int>> blockedCallers,
                                      const std::shared_ptr<log::Logs>& logs);

// How a collective called directly waits on its data links, where `localSize` ranks share
// `hostCpus` CPUs (0: a CPU each, or unknown). Where every rank has a CPU, it polls for
// config.directSpinTime on every message, as MPI's blocking calls do: its core would otherwise
// idle, and on a VM each wake-up from idle is slow. Where the ranks outnumber the CPUs, some
// other rank can always use the core, so polling only takes turns from it: the waits are the
// engine's, polling for a message of at most 64 KiB for config.engine.spinTime (or directSpinTime,
// if shorter) and never through a larger transfer (docs/performance.md measures both).
collectives::SpinPolicy directCollectiveSpins(const Config& config, int localSize, int hostCpus);

}  // namespace hvd::runtime
