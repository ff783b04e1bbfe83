// What the executor (host and GPU halves) needs from the configuration: Config embeds it
// (Config::engine.executor), the parameter rows fill it, fromParams derives the rest.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "collectives/algorithms/allreduce.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::runtime {

struct ExecutorOptions {
  // The rows tagged Executor: segmentBytes (0: the communicator's), ringThresholdBytes,
  // allreduceAlgorithm, gpuUseNccl.
#define HVD_OPTION_MEMBERS_OF_Executor(type, member) type member{};
#include "common/param_option_members.h"
  std::shared_ptr<const collectives::NetworkModel>
      networkModel;  // Auto's across hosts; may be null
  // Every rank of the job is on this host, where a collective's round trip costs a few
  // microseconds: the host executor then fills, reduces and drains a fusion buffer in pieces
  // that stay in the core's cache (Executor::fusionPieceBytes).
  bool fuseInPieces = false;
  std::chrono::milliseconds opTimeout{300000};  // bounds the wait for GPU work
  bool gpuHierarchicalAllreduce = false;        // HVD_HIERARCHICAL_ALLREDUCE
  std::string hostname;                         // named in NCCL errors; groups ranks into hosts
  std::shared_ptr<log::Logs> logs = nullptr;    // the Runtime's; null: the process's
};

}  // namespace hvd::runtime
