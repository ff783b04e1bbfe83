// The liveness tracker (runtime/engine/liveness.h), driven with time passed in: no sockets.
#include <catch2/catch.hpp>

#include "runtime/engine/liveness.h"

using hvd::runtime::Liveness;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("rank 0 names a rank silent for the timeout; a heard or exempt one is not named") {
  Liveness rank0(0, 3, seconds(60));
  Liveness::Time t0{};
  rank0.start(t0);
  CHECK_FALSE(rank0.silentPeer(t0 + seconds(59), nullptr));
  rank0.heard(2, t0 + seconds(30));
  auto silent = rank0.silentPeer(t0 + seconds(61), nullptr);
  REQUIRE(silent);
  CHECK_THAT(*silent, Catch::Contains("rank 0/3: rank 1 has sent nothing for 61 s") &&
                          Catch::Contains("HVD_LIVENESS_TIMEOUT_SECONDS"));
  CHECK_FALSE(rank0.silentPeer(t0 + seconds(61), [](int peer) { return peer == 1; }));
  CHECK(rank0.silentPeer(t0 + seconds(91), [](int peer) { return peer == 1; }));  // rank 2
}

TEST_CASE("the other ranks watch rank 0 only") {
  Liveness rank2(2, 3, seconds(10));
  Liveness::Time t0{};
  rank2.start(t0);
  rank2.heard(0, t0 + seconds(5));
  CHECK_FALSE(rank2.silentPeer(t0 + seconds(12), nullptr));  // rank 1 is not its to watch
  auto silent = rank2.silentPeer(t0 + seconds(16), nullptr);
  REQUIRE(silent);
  CHECK_THAT(*silent, Catch::Contains("rank 0 has sent nothing for 11 s"));
}

TEST_CASE("the silent rank's host is named when the hosts are known") {
  Liveness rank0(0, 3, seconds(60), {"node-a", "node-b", "node-c"});
  Liveness::Time t0{};
  rank0.start(t0);
  rank0.heard(1, t0 + seconds(30));
  auto silent = rank0.silentPeer(t0 + seconds(61), nullptr);
  REQUIRE(silent);
  CHECK_THAT(*silent, Catch::Contains("rank 0/3: rank 2 (on host node-c) has sent nothing"));
}

TEST_CASE("a heartbeat is due once per interval, never when liveness is off or alone") {
  Liveness on(1, 2, seconds(60));
  Liveness::Time t0{};
  on.start(t0);
  CHECK(on.heartbeatDue(t0));
  CHECK_FALSE(on.heartbeatDue(t0 + milliseconds(999)));
  CHECK(on.heartbeatDue(t0 + milliseconds(1000)));
  Liveness off(1, 2, seconds(0));
  off.start(t0);
  CHECK_FALSE(off.heartbeatDue(t0));
  CHECK_FALSE(off.silentPeer(t0 + seconds(1000), nullptr));
  Liveness alone(0, 1, seconds(60));
  alone.start(t0);
  CHECK_FALSE(alone.heartbeatDue(t0));
}
