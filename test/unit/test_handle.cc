// OpHandle: a result posted by another thread reaches a waiter whether it comes within the
// waiter's spin or after it (when the waiter sleeps); errors are rethrown; a result that never
// comes is a TimeoutError naming the operation.
#include <catch2/catch.hpp>

#include <thread>

#include "common/error.h"
#include "runtime/engine/handle.h"

using namespace hvd;
using namespace hvd::runtime;
using namespace std::chrono_literals;

TEST_CASE("a handle's result reaches its waiter during the spin and after it") {
  for (auto delay : {0us, 20us, 5000us}) {
    for (auto spin : {0us, 200us}) {
      OpHandle handle("allreduce \"x\"", spin);
      std::thread engine([&] {
        std::this_thread::sleep_for(delay);
        OpResult r;
        r.value = 7;
        handle.complete(std::move(r));
      });
      CHECK(handle.wait(5000ms).value == 7);
      CHECK(handle.poll());
      engine.join();
    }
  }
}

TEST_CASE("a handle rethrows the operation's error") {
  OpHandle handle("broadcast \"w\"", 50us);
  std::thread engine(
      [&] { handle.fail(std::make_exception_ptr(IoError("rank 1 exited with code 3"))); });
  CHECK_THROWS_WITH(handle.wait(5000ms), "rank 1 exited with code 3");
  engine.join();
}

TEST_CASE("a wait on a handle that never completes times out naming the operation") {
  OpHandle handle("allgather \"y\"", 100us);
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(handle.wait(50ms), Catch::Contains("allgather \"y\": not complete after"));
  CHECK(std::chrono::steady_clock::now() - start >= 50ms);
  CHECK_FALSE(handle.poll());
}

TEST_CASE("a handle counts its waiters as blocked callers while they wait, also on errors") {
  auto blocked = std::make_shared<std::atomic<int>>(0);
  for (bool fails : {false, true}) {
    OpHandle handle("allreduce \"z\"", 100us, blocked);
    std::atomic<int> seenWhileWaiting{-1};
    std::thread engine([&] {
      while (blocked->load() == 0) std::this_thread::yield();
      seenWhileWaiting = blocked->load();
      if (fails)
        handle.fail(std::make_exception_ptr(IoError("rank 1 exited")));
      else
        handle.complete(OpResult{});
    });
    if (fails)
      CHECK_THROWS_WITH(handle.wait(5000ms), "rank 1 exited");
    else
      handle.wait(5000ms);
    engine.join();
    CHECK(seenWhileWaiting == 1);
    CHECK(blocked->load() == 0);
  }
  // A timed-out wait stops counting too.
  OpHandle never("allgather \"y\"", 0us, blocked);
  CHECK_THROWS(never.wait(10ms));
  CHECK(blocked->load() == 0);
}
