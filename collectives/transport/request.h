// A pending send or receive. wait() drives the transport's progress on the calling thread until
// the operation completes, fails (rethrowing the transport's error, which names rank, peer, tag
// and bytes) or passes the deadline (TimeoutError naming the same).
// Thread model: a Request is used by the thread that owns its Comm.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>

namespace hvd::collectives {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Implemented by a transport: run completion handlers until at least one has run or the
// deadline passes.
class ProgressEngine {
 public:
  virtual ~ProgressEngine() = default;
  virtual void progressUntil(Deadline deadline) = 0;
};

struct RequestState {
  bool done = false;
  std::exception_ptr error;
  std::string description;  // "rank 0/2: recv from rank 1 (127.0.0.1:3456) tag=0x.. 64 bytes"
};

class Request {
 public:
  Request() = default;
  Request(std::shared_ptr<RequestState> state, ProgressEngine* engine)
      : state_(std::move(state)), engine_(engine) {}

  void wait(Deadline deadline);
  bool done() const { return !state_ || state_->done; }

 private:
  std::shared_ptr<RequestState> state_;
  ProgressEngine* engine_ = nullptr;
};

}  // namespace hvd::collectives
