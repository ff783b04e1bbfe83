// What a caller hands the engine (Operation) and the engine's record of it until it completes
// (LocalOp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/operations.h"
#include "runtime/engine/handle.h"
#include "runtime/engine/operation.h"
#include "runtime/engine/timeline.h"

namespace hvd::runtime {

struct Operation {
  OpType type = OpType::Allreduce;
  // Empty: the engine names it "<op>.noname.<n>", n counting per op type and process set.
  std::string name;
  // Several for a grouped operation. The caller keeps the memory alive and unmodified until
  // the handle completes.
  std::vector<collectives::Tensor> inputs;
  // allreduce and broadcast only: where results go (may alias inputs); empty means in place.
  std::vector<collectives::Tensor> outputs;
  ReduceOp reduceOp = ReduceOp::Sum;
  int32_t root = 0;  // broadcast: rank within the process set
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t processSet = 0;
  DeviceId device;
  // GPU tensors: the cudaStream_t the caller produced them on (null: the legacy default
  // stream). The collective waits for the work queued on it before submission.
  void* stream = nullptr;
  std::vector<int64_t> splits;    // alltoall: rows for each rank; empty means equal
  std::vector<int32_t> setRanks;  // add_process_set: its ranks; remove_process_set: {id}
  // Allocates allgather/alltoall/reducescatter outputs, on the engine thread; when empty the
  // engine allocates and the result owns the memory.
  collectives::Allocate allocate;
};

struct LocalOp {
  LocalOp() = default;
  LocalOp(const LocalOp&) = delete;
  LocalOp& operator=(const LocalOp&) = delete;
  // An operation the engine drops without completing it fails, so its caller never waits
  // for a result that cannot come (on the engine thread, or after it was joined).
  ~LocalOp();

  Operation op;
  OpRequest request;     // as this rank submitted it (first dimensions included)
  OpRequest negotiated;  // request.negotiated(), what the coordinator and the cache see
  Handle handle;
  OpResult result;
  std::shared_ptr<void> ready;  // GPU tensors: where the caller's stream was (gpu_executor.h)
  std::chrono::steady_clock::time_point submittedAt;
};

// Checks what one rank can check alone and describes the operation for negotiation. Throws
// InvalidArgument naming the operation and the bad value. `setSize` is the size of the
// operation's process set.
OpRequest describeOperation(const Operation& op, int setSize);

// Adasum's conditions (allreduce, host memory, dtype and set size), refused on submission, on
// every rank alike, rather than when the collective runs. `opName` is the name as the caller
// gave it (quoted), or the op type for an unnamed one.
void checkAdasumOperation(const Operation& op, const std::string& opName, int setSize);

// The timeline's NEGOTIATE phase of each operation (null entries skipped): from its
// submission to `now`, when the engine runs it.
std::vector<Timeline::Event> negotiationEvents(const std::vector<LocalOp*>& ops,
                                               Timeline::Time now);

}  // namespace hvd::runtime
