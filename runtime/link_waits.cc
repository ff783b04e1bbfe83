#include "runtime/link_waits.h"

#include <algorithm>

namespace hvd::runtime {

collectives::SpinPolicy directCollectiveSpins(const Config& config, int localSize, int hostCpus) {
  if (hostCpus <= 0 || localSize <= hostCpus)
    return {.smallSpin = config.directSpinTime, .largeSpin = config.directSpinTime};
  return {.smallSpin = std::min(config.engine.spinTime, config.directSpinTime),
          .largeSpin = std::chrono::microseconds(0)};
}

collectives::WaitPolicy dataLinkWaits(const Config& config, const CpuSharing& sharing,
                                      std::shared_ptr<std::atomic<int>> blockedCallers,
                                      const std::shared_ptr<log::Logs>& logs) {
  const Topology& t = config.topology;
  collectives::WaitPolicy data{.mode = collectives::WaitMode::Blocking};
  if (blockedCallers) {
    data.spins = {.smallSpin = config.engine.spinTime, .blockedCallers = std::move(blockedCallers)};
    if (config.engine.coordinator.stallCheck)
      data.spins.stall = {.warnAfter = config.engine.coordinator.stallWarning,
                          .failAfter = config.engine.coordinator.stallShutdown,
                          .logs = logs};
  } else {
    data.spins = directCollectiveSpins(config, sharing.ranks, sharing.cpus);
    if (t.rank == 0 && data.spins.largeSpin != config.directSpinTime && logs)
      logs->get("runtime")->info(
          "{} ranks share {} CPU{} of {}: collectives poll only for messages of at most 64 KiB, "
          "for {} us (HVD_SPIN_MICROSECONDS), and sleep at once on larger ones",
          sharing.ranks, sharing.cpus, sharing.cpus == 1 ? "" : "s",
          sharing.acrossHostNames
              ? "this machine (hosts of other names run on its kernel: containers or network "
                "namespaces)"
              : "this host",
          data.spins.smallSpin.count());
  }
  // Collectives called directly have no heartbeats: without this they would wait for a
  // stopped peer (shared memory knows its process) until the op timeout.
  data.spins.stall.stoppedPeerAfter = config.engine.livenessTimeout;
  data.spins.stall.logs = logs;
  return data;
}

}  // namespace hvd::runtime
