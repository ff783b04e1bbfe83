// Bounded polling before a thread sleeps: a result that arrives within microseconds costs no
// kernel wake-up (5-20 us each on a VM). Between polls the thread yields, so a runnable thread
// on the same core (often the one that will produce the result) runs first.
#pragma once

#include <chrono>
#include <thread>

namespace hvd {

// Calls `ready` until it returns true (then returns true) or `until` has passed (then false).
template <typename Ready>
bool spinUntil(std::chrono::steady_clock::time_point until, Ready&& ready) {
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace hvd
