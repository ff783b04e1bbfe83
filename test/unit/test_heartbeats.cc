// The heartbeat protocol (runtime/engine/heartbeats.h) with time and messages passed in.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "runtime/engine/heartbeats.h"
#include "runtime/engine/messages.h"

using namespace hvd::runtime;
using std::chrono::seconds;

TEST_CASE("rank 0 beats to every rank, the others to rank 0, once per interval") {
  Heartbeats::Time t0{};
  Heartbeats rank0(0, 3, seconds(30), {});
  rank0.start(t0);
  auto beat = rank0.due(t0, 0);
  REQUIRE(beat);
  CHECK(beat->peers == std::vector<int>{1, 2});
  CHECK(ResponseList::decode(beat->message).seq == ResponseList::kHeartbeatSeq);
  CHECK_FALSE(rank0.due(t0 + std::chrono::milliseconds(500), 0));
  CHECK(rank0.due(t0 + seconds(1), 0));

  Heartbeats rank2(2, 3, seconds(30), {});
  rank2.start(t0);
  auto mine = rank2.due(t0, 17);
  REQUIRE(mine);
  CHECK(mine->peers == std::vector<int>{0});
  CHECK(RequestList::decode(mine->message).responseListsSeen == 17);
}

TEST_CASE("no beat while one is being sent, and none at all without a timeout") {
  Heartbeats::Time t0{};
  Heartbeats beats(1, 2, seconds(30), {});
  beats.start(t0);
  beats.sending() = true;
  CHECK_FALSE(beats.due(t0, 0));
  beats.sending() = false;
  CHECK(beats.due(t0, 0));
  Heartbeats off(1, 2, seconds(0), {});
  off.start(t0);
  CHECK_FALSE(off.enabled());
  CHECK_FALSE(off.due(t0 + seconds(100), 0));
  CHECK_NOTHROW(off.check(t0 + seconds(100), nullptr));
}

TEST_CASE("what arrives inside a collective is kept in order; a relayed failure ends it") {
  Heartbeats::Time t0{};
  Heartbeats rank1(1, 3, seconds(10), {"a", "b", "c"});
  rank1.start(t0);
  ResponseList beat;
  beat.seq = ResponseList::kHeartbeatSeq;
  ResponseList work;
  work.seq = 4;
  rank1.heardInCollective({{0, beat.encode()}, {0, work.encode()}}, t0 + seconds(8));
  auto kept = rank1.takeHeardInCollective();
  REQUIRE(kept.size() == 2);
  CHECK(ResponseList::decode(kept[1].second).seq == 4);
  CHECK(rank1.takeHeardInCollective().empty());
  CHECK_NOTHROW(rank1.check(t0 + seconds(17), nullptr));  // heard rank 0 at 8 s

  ResponseList fatal;
  Response r;
  r.kind = ResponseKind::Fatal;
  r.message = "rank 2 (host c) failed: out of memory";
  fatal.responses.push_back(r);
  CHECK_THROWS_AS(rank1.heardInCollective({{0, fatal.encode()}}, t0 + seconds(9)), hvd::PeerLost);
}

TEST_CASE("a silent peer is named with its host; an exempt one is not") {
  Heartbeats::Time t0{};
  Heartbeats rank0(0, 3, seconds(10), {"a", "b", "c"});
  rank0.start(t0);
  rank0.heard(1, t0 + seconds(5));
  CHECK_THROWS_WITH(rank0.check(t0 + seconds(12), nullptr),
                    Catch::Contains("rank 2") && Catch::Contains("c"));
  CHECK_NOTHROW(rank0.check(t0 + seconds(12), [](int peer) { return peer == 2; }));
}
