// Runs one Execute response on this rank: the collectives for its operations, with tensor
// fusion for allreduce. Every rank runs the same response with tensors of the same sizes, so
// the fusion chunks below come out the same everywhere.
// Thread model: the engine thread only.
#pragma once

#include <functional>
#include <vector>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/broadcast.h"
#include "collectives/transport/comm.h"
#include "runtime/engine/executor_options.h"
#include "runtime/engine/fusion.h"
#include "runtime/engine/gpu_executor.h"
#include "runtime/engine/local_op.h"
#include "runtime/engine/messages.h"
#include "runtime/engine/timeline.h"

namespace hvd::runtime {

struct ExecutorCounters {
  uint64_t collectives = 0;   // collective calls made
  uint64_t fusedTensors = 0;  // tensors that went through the fusion buffer
};

// One tensor of an allreduce response, as the fusion planner and the collectives see it.
struct AllreduceSlot {
  const void* input;
  void* output;
  TensorMeta meta;
  std::string name;
};

// The tensors of an allreduce response in order, and the request whose op and scale factors
// they share. ops[i] null means this rank joined: its tensors are zeros, shaped as
// response.forJoined[i], from `zeros` (host or device memory, kept alive by the caller).
struct AllreduceSlots {
  std::vector<AllreduceSlot> slots;
  const OpRequest* params = nullptr;
};
AllreduceSlots allreduceSlots(const Response& response, const std::vector<LocalOp*>& ops,
                              const std::function<void*(const TensorMeta&)>& zeros);

class Executor {
 public:
  Executor(ExecutorOptions options, Timeline& timeline) : options_(options), timeline_(timeline) {}

  // ops[i] is this rank's operation for response.names[i], or null where this rank joined and
  // contributes zeros shaped like response.forJoined[i]. Results go to each op's `result`.
  // Throws InvalidArgument when the operation cannot run (all ranks throw alike), other
  // hvd::Errors when the communicator broke.
  void run(const Response& response, const std::vector<LocalOp*>& ops, collectives::Comm& comm);
  const ExecutorCounters& counters() const { return counters_; }
  // `comm` is going away (a process set was removed).
  void forget(const collectives::Comm* comm) {
    if (gpu_) gpu_->forget(comm);
  }

 private:
  void allreduce(const Response& response, const std::vector<LocalOp*>& ops,
                 collectives::Comm& comm);
  void allreduceChunk(const std::vector<AllreduceSlot>& slots,
                      const std::vector<std::size_t>& chunk, const OpRequest& params,
                      collectives::Comm& comm);
  // Bytes of a fused chunk of `totalBytes` reduced at a time (a multiple of the element size).
  std::size_t fusionPieceBytes(std::size_t totalBytes, std::size_t elementBytes,
                               const collectives::Comm& comm) const;
  void runOne(LocalOp& op, collectives::Comm& comm);
  // Allocates the output of the op's tensor `index` (its own dtype: a grouped operation's
  // tensors may differ), unless the caller gave an allocator.
  collectives::Allocate allocatorFor(LocalOp& op, std::size_t index);

  ExecutorOptions options_;
  Timeline& timeline_;
  ExecutorCounters counters_;
  std::unique_ptr<GpuExecutor> gpu_;  // created with the first GPU operation
  std::vector<std::byte> fusionBuffer_;
};

}  // namespace hvd::runtime
