// A pending send or receive. wait() drives the transport's progress on the calling thread until
// the operation completes, fails (rethrowing the transport's error, which names rank, peer, tag
// and bytes) or passes the deadline (TimeoutError naming the same).
// Thread model: a Request is used by the thread that owns its Comm.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

#include "collectives/transport/wait_policy.h"

namespace hvd::collectives {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Now, for deadlines and stall checks, whose limits are seconds: the kernel's coarse monotonic
// clock, steady_clock's own epoch but up to a tick (a few ms) behind. It costs a fifth of
// steady_clock's read (5 ns against 23 on the development VM), and a small collective's send
// and receive each read the time: a tenth of a 2-rank 4-byte allreduce over shared memory.
inline Clock::time_point coarseNow() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

// Implemented by a transport: run completion handlers until at least one has run or the
// deadline passes.
class ProgressEngine {
 public:
  virtual ~ProgressEngine() = default;
  // `latencyBound`: the caller waits for a small message (at most kLatencyBoundBytes), so a
  // transport configured to spin may poll for a while before it sleeps. Waits on larger
  // transfers poll only as the device's SpinPolicy says: spinning through them while
  // the rank computes would take its core (training measured up to 6% slower).
  virtual void progressUntil(Deadline deadline, bool latencyBound) = 0;
  // Runs the handlers that are ready now, without blocking.
  virtual void poll() = 0;
  // Makes a progressUntil running on another thread (or the next one to start) return soon.
  // The only method any thread may call.
  virtual void wake() = 0;
  // The device's limits for a transfer that stopped moving.
  virtual const StallWatch& stallWatch() const;
};

struct RequestState;

// Formats a request's description only when an error or a timeout needs it, so the fast path
// pays nothing for the context the messages carry. Implemented by the transport's connection,
// which outlives its requests' waits.
class RequestDescriber {
 public:
  virtual ~RequestDescriber() = default;
  // e.g. "rank 0/2: recv from rank 1 (127.0.0.1:3456) tag=0x100000000000007 64 bytes"
  virtual std::string describe(const RequestState& request) const = 0;
  // What the transport can tell of the peer's process when a transfer stopped moving, e.g.
  // "; rank 1's process (pid 4242) is stopped (SIGSTOP or a debugger)", or "".
  virtual std::string peerState() const { return ""; }
  // Whether the transport sees the peer's process stopped (it cannot move any data).
  virtual bool peerStopped() const { return false; }
};

struct RequestState {
  bool done = false;
  std::exception_ptr error;
  const char* verb = "";  // "send to", "recv from"
  uint64_t tag = 0;
  std::size_t bytes = 0;
  std::size_t moved = 0;  // bytes transferred so far, where the transport counts them
  const RequestDescriber* describer = nullptr;

  std::string description() const { return describer ? describer->describe(*this) : verb; }
};

// While one lives, Request::wait on its thread calls `pulse` about once a second (the engine
// sends its heartbeats from inside long collectives this way). One per thread; not nested.
class WaitPulse {
 public:
  explicit WaitPulse(std::function<void()> pulse);
  ~WaitPulse();
  WaitPulse(const WaitPulse&) = delete;
  WaitPulse& operator=(const WaitPulse&) = delete;

 private:
  std::function<void()> pulse_;
};

// Calls this thread's WaitPulse when a second has passed since the last call; for waits that
// are not Request::wait (a GPU stream's). Cheap when no pulse is set.
void pulseIfDue();

class Request {
 public:
  Request() = default;
  Request(std::shared_ptr<RequestState> state, ProgressEngine* engine)
      : state_(std::move(state)), engine_(engine) {}

  void wait(Deadline deadline);
  // True once the request has completed; rethrows its error if it failed. Does not drive
  // progress (call the engine's poll or progressUntil for that). An empty Request is done.
  bool test() const;

 private:
  void waitForCompletion(Deadline deadline);

  std::shared_ptr<RequestState> state_;
  ProgressEngine* engine_ = nullptr;
};

}  // namespace hvd::collectives
