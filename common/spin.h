// Bounded polling before a thread sleeps: a result that arrives within microseconds costs no
// kernel wake-up (several microseconds each on a VM). Between polls the thread yields, so a
// runnable thread on the same core (often the one that will produce the result) runs first.
//
// Polling pays only while the core is nearly free. When many threads wait for it (more ranks
// than cores several times over, or a compute thread of the rank's own), each yield hands it to
// another poller or to work for a whole turn, and every poller takes turns from the ranks that
// have work: with 64 ranks on 2 cores a small allreduce is faster sleeping at once, with 8
// ranks on one host much faster polling (docs/performance.md). A yield that comes back late
// tells the two apart (ContentionWatch).
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace hvd {

// A yield this long means other threads were waiting for this core (hand-offs between a few
// busy threads take a few microseconds). A poll gives up after kContendedYields of them, when
// they are at least a quarter of its yields: one now and then is the hypervisor's or another
// process's moment (a vCPU descheduled for a while), not a crowd at the core.
inline constexpr std::chrono::microseconds kContendedYield{50};
inline constexpr int kContendedYields = 2;
// After a poll gave up, the next 1, 2, 4, ... (at most this many) waits sleep at once, and the
// one after polls again to look; a poll that ends well resets it.
inline constexpr int kMostSkippedPolls = 256;

// Whether polling pays on this thread's core, learnt from its polls. One per waiting thread
// (a transport device's, used by the thread that owns its communicator).
class ContentionWatch {
 public:
  // Whether this wait should poll: false while recent polls found the core contended.
  bool beginPoll() {
    if (skipped_ < skipFor_) {
      ++skipped_;
      return false;
    }
    skipped_ = 0;
    yields_ = slow_ = 0;
    return true;
  }
  // Yields the core; false when the poll should give up (its yields came back late).
  bool yield() {
    auto before = std::chrono::steady_clock::now();
    std::this_thread::yield();
    ++yields_;
    if (std::chrono::steady_clock::now() - before <= kContendedYield) return true;
    if (++slow_ < kContendedYields || 4 * slow_ < yields_) return true;
    skipFor_ = std::min(std::max(1, 2 * skipFor_), kMostSkippedPolls);
    return false;
  }
  // The poll found its result, or ran its time without a late yield: polling pays again.
  void pollEnded() { skipFor_ = 0; }

 private:
  int yields_ = 0;  // of this poll
  int slow_ = 0;
  int skipFor_ = 0;
  int skipped_ = 0;
};

// Calls `ready` until it returns true (then returns true), or `until` has passed or the core
// turned out to be contended (then false, after one more look).
template <typename Ready>
bool spinUntil(std::chrono::steady_clock::time_point until, Ready&& ready, ContentionWatch& watch) {
  if (!watch.beginPoll()) return ready();
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) {
      watch.pollEnded();
      return false;
    }
    if (!watch.yield()) return ready();
  }
  watch.pollEnded();
  return true;
}

// The same for a one-off wait.
template <typename Ready>
bool spinUntil(std::chrono::steady_clock::time_point until, Ready&& ready) {
  ContentionWatch watch;
  return spinUntil(until, std::forward<Ready>(ready), watch);
}

}  // namespace hvd
