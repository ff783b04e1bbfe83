// What the executor (host and GPU halves) needs from the configuration; runtime.cc fills it
// from Config.
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
  std::size_t segmentBytes = 0;  // HVD_SEGMENT_BYTES; 0: the communicator's
  std::size_t ringThresholdBytes = 128 * 1024;
  collectives::AllreduceAlgorithm allreduceAlgorithm = collectives::AllreduceAlgorithm::Auto;
  std::shared_ptr<const collectives::NetworkModel>
      networkModel;  // Auto's across hosts; may be null
  // Every rank of the job is on this host, where a collective's round trip costs a few
  // microseconds: the host executor then fills, reduces and drains a fusion buffer in pieces
  // that stay in the core's cache (Executor::fusionPieceBytes).
  bool fuseInPieces = false;
  std::chrono::milliseconds opTimeout{300000};  // bounds the wait for GPU work
  bool gpuUseNccl = true;                       // HVD_GPU_BACKEND=nccl
  bool gpuHierarchicalAllreduce = false;        // HVD_HIERARCHICAL_ALLREDUCE
  std::string hostname;                         // named in NCCL errors; groups ranks into hosts
  std::shared_ptr<log::Logs> logs = nullptr;    // the Runtime's; null: the process's
};

}  // namespace hvd::runtime
