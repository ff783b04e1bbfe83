// The caller's side of one enqueued operation. The engine thread completes it exactly once, with
// a result or an error; any thread may poll or wait on it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/operations.h"
#include "runtime/engine/operation.h"

namespace hvd::runtime {

// An output the engine allocated itself (when the caller passed no Allocate): it lives as long
// as the result that holds it. Host memory, or device memory (freed with cudaFree) for an
// operation on a GPU.
struct OwnedBuffer {
  std::shared_ptr<std::byte> bytes;
  std::size_t size = 0;
  DeviceId device;
};

// Host memory for an output, aligned to kHostOutputAlignment: frameworks that adopt it through
// DLPack without a copy may require it (TensorFlow's CPU kernels abort on a tensor that is not
// 64-byte aligned), and vectorised reductions prefer it.
inline constexpr std::size_t kHostOutputAlignment = 64;
OwnedBuffer allocateHostBuffer(std::size_t bytes);

struct OpResult {
  // allgather, alltoall, reducescatter: one output per input tensor; others: empty.
  std::vector<collectives::Tensor> outputs;
  std::vector<OwnedBuffer> owned;                    // storage of outputs the engine allocated
  std::vector<std::vector<int64_t>> receivedSplits;  // alltoall: rows from each rank, per tensor
  int32_t value = -1;  // join: the last rank to join; add_process_set: the new set's id
};

class OpHandle {
 public:
  // `spin`: how long wait() polls (yielding the core between polls) before it sleeps. A result
  // that arrives within it costs the waiter no kernel wake-up, and the engine no futex call.
  // `blocked`, when given, counts this handle's waiters while they wait.
  explicit OpHandle(std::string description, std::chrono::microseconds spin = {},
                    std::shared_ptr<std::atomic<int>> blocked = nullptr)
      : description_(std::move(description)), spin_(spin), blocked_(std::move(blocked)) {}
  const std::string& description() const { return description_; }

  bool poll() const;
  // Blocks until done, then returns the result or rethrows the operation's error. Throws
  // TimeoutError naming the operation after `timeout`.
  OpResult& wait(std::chrono::milliseconds timeout);

  // Engine thread only, once.
  void complete(OpResult result);
  void fail(std::exception_ptr error);

 private:
  std::string description_;
  std::chrono::microseconds spin_;
  std::shared_ptr<std::atomic<int>> blocked_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::atomic<bool> finished_{false};  // written under mutex_; read without it by the spin
  OpResult result_;
  std::exception_ptr error_;
};

using Handle = std::shared_ptr<OpHandle>;

}  // namespace hvd::runtime
