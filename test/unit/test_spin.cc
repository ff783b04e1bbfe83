// ContentionWatch on the real scheduler: this thread and busy threads pinned to one CPU.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/spin.h"

using namespace hvd;

namespace {

// Pins the calling thread to `cpu` for the scope; restores its mask after. No Catch assertion
// here: busy threads pin themselves too, and Catch is not thread-safe (ok() says how it went).
struct Pinned {
  explicit Pinned(int cpu) {
    got = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  ~Pinned() {
    if (got) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  }
  bool ok() const { return got && pinned; }
  cpu_set_t before{};
  bool got = false, pinned = false;
};

int someAllowedCpu() {
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) return c;
  FAIL("no CPU in this thread's mask");
  return 0;
}

}  // namespace

TEST_CASE("a core that busy threads share makes polls give up, and skip more waits each time") {
  int cpu = someAllowedCpu();
  std::atomic<bool> stop{false};
  std::atomic<int> pinnedBusy{0};
  std::vector<std::thread> busy;
  for (int i = 0; i < 3; ++i)
    busy.emplace_back([&] {
      Pinned same(cpu);
      if (same.ok()) ++pinnedBusy;
      while (!stop.load(std::memory_order_relaxed)) {}
    });
  // The busy threads must hold the core before the watch looks: a thread still starting (slow
  // under a sanitizer) leaves the core free, and every yield comes back at once.
  auto started = std::chrono::steady_clock::now();
  while (pinnedBusy < 3 && std::chrono::steady_clock::now() - started < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<int> skippedBeforeEachPoll;
  {
    Pinned same(cpu);
    REQUIRE(same.ok());
    ContentionWatch watch;
    int skipped = 0;
    for (int wait = 0; wait < 40 && skippedBeforeEachPoll.size() < 5; ++wait) {
      if (!watch.beginPoll()) {
        ++skipped;
        continue;
      }
      skippedBeforeEachPoll.push_back(skipped);
      skipped = 0;
      // A yield hands the core to a busy thread for a whole turn (milliseconds).
      bool gaveUp = false;
      for (int i = 0; i < 100 && !gaveUp; ++i) gaveUp = !watch.yield();
      CHECK(gaveUp);
    }
    // Found free again: one poll that ends well lets the next wait poll at once.
    stop = true;
    for (auto& t : busy) t.join();
    busy.clear();
    // (Another process may take this core now and then: a yield that comes back at once ends
    // the look.)
    bool polled = false, fast = false;
    for (int wait = 0; wait < 10000 && !fast; ++wait)
      if (watch.beginPoll()) {
        polled = true;
        fast = watch.yield();
      }
    REQUIRE((polled && fast));
    watch.pollEnded();
    CHECK(watch.beginPoll());
  }
  CHECK(pinnedBusy == 3);
  CHECK(skippedBeforeEachPoll == std::vector<int>{0, 1, 2, 4, 8});
}

TEST_CASE("spinUntil returns what it was waiting for, or false by its time") {
  std::atomic<int> polls{0};
  CHECK(spinUntil(std::chrono::steady_clock::now() + std::chrono::seconds(5),
                  [&] { return ++polls >= 3; }));
  CHECK(polls == 3);
  // At its time, or sooner where its yields found the core crowded (a sanitizer's run).
  auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(spinUntil(start + std::chrono::milliseconds(20), [] { return false; }));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
