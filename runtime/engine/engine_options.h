// What the engine takes from the configuration. The runtime's Config embeds it
// (Config::engine): the parameter rows tagged Engine, Coordinator, Executor and Autotune declare
// and fill their members, Config::fromParams derives the rest, and the Runtime adds the objects
// only it has (loggers, the hosts, the failure callback).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/autotuner.h"
#include "runtime/engine/coordinator.h"
#include "runtime/engine/executor_options.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::runtime {

struct EngineOptions {
  // The rows tagged Engine:
  // - inlineAllreduceBytes: host-memory allreduces of at most this many bytes travel with their
  //   requests and are reduced by the coordinator (inline_allreduce.h); 0: never.
  // - timelinePath (rank 0 writes it; empty: none), timelineMarkCycles.
  // - livenessTimeout: a peer this engine hears nothing from for this long fails the job
  //   (heartbeats every second); zero: never.
  // - spinTime: after activity, the loop keeps polling this long before it sleeps: the next
  //   submission or the coordinator's reply usually follows within microseconds, and catching
  //   it by polling saves a kernel wake-up of the engine thread. Handles' wait() polls as long.
#define HVD_OPTION_MEMBERS_OF_Engine(type, member) type member{};
#include "common/param_option_members.h"
  CoordinatorOptions coordinator;
  ExecutorOptions executor;
  AutotuneOptions autotune;  // rank 0 tunes the coordinator when autotune.enabled
  std::chrono::milliseconds opTimeout{300000};  // HVD_OP_TIMEOUT_SECONDS (Config::opTimeout)
  // Handles count their blocked waiters here; the data links read it (World::blockedCallers).
  std::shared_ptr<std::atomic<int>> blockedCallers;
  // Every rank's host name, by rank (messages that name a silent peer); empty: unknown.
  std::vector<std::string> hostOfRank;
  // Called on the engine thread when the engine stops on a fatal error, with the error and
  // whether a peer's failure caused it (the Runtime tells the launcher: failure_reports.h).
  std::function<void(const std::string& why, bool causedByPeer)> onFailure;
  // The Runtime's loggers (common/logging.h); null: the process's. executor.logs likewise.
  std::shared_ptr<log::Logs> logs = nullptr;
};

}  // namespace hvd::runtime
