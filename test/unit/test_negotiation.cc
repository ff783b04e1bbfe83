// The negotiation state machine, the response cache, the wire format, fusion planning and the
// timeline file, driven directly: no sockets, no threads.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/config.h"
#include "runtime/engine/coordinator.h"
#include "runtime/engine/executor.h"
#include "runtime/engine/inline_allreduce.h"
#include "runtime/engine/timeline.h"

using namespace hvd::runtime;
using hvd::collectives::DType;
using std::chrono::seconds;

namespace {

OpRequest allreduce(const std::string& name, int64_t elements, DType dtype = DType::Float32) {
  OpRequest r;
  r.type = OpType::Allreduce;
  r.name = name;
  r.tensors = {{dtype, {elements}}};
  return r;
}

CoordinatorOptions options(int size, std::size_t fusion = 0) {
  CoordinatorOptions o = defaultEngineOptions().coordinator;
  o.size = size;
  o.fusionThresholdBytes = fusion;
  o.stallWarning = seconds(5);
  o.stallShutdown = seconds(20);
  return o;
}

const SteadyTime t0{};

}  // namespace

TEST_CASE("an operation is ready only when every rank has submitted it, in readiness order") {
  Coordinator c(options(3));
  c.submit(0, allreduce("a", 4), 0, t0);
  c.submit(1, allreduce("b", 4), 0, t0);
  c.submit(1, allreduce("a", 4), 0, t0);
  CHECK(c.dispatch(t0).responses.empty());
  c.submit(2, allreduce("b", 4), 0, t0);
  c.submit(0, allreduce("b", 4), 0, t0);  // b is ready before a
  c.submit(2, allreduce("a", 4), 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 2);
  CHECK(list.responses[0].names == std::vector<std::string>{"b"});
  CHECK(list.responses[1].names == std::vector<std::string>{"a"});
  CHECK(list.responses[0].kind == ResponseKind::Execute);
}

TEST_CASE("disagreeing ranks get one error naming the tensor and the ranks by value") {
  Coordinator c(options(4));
  for (int r = 0; r < 4; ++r)
    c.submit(r, allreduce("grad.w", 8, r == 1 ? DType::Float16 : DType::Float32), 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Error);
  CHECK(list.responses[0].message ==
        "allreduce \"grad.w\": dtype mismatch: ranks {0,2,3} float32, rank {1} float16");
}

TEST_CASE("fusion groups compatible allreduces up to the threshold") {
  Coordinator c(options(2, 4096));
  auto submitBoth = [&](const OpRequest& r) {
    c.submit(0, r, 0, t0);
    c.submit(1, r, 0, t0);
  };
  submitBoth(allreduce("a", 256));                  // 1 KiB
  submitBoth(allreduce("b", 256, DType::Float64));  // other dtype: its own group
  submitBoth(allreduce("c", 512));                  // 2 KiB, fits with a
  submitBoth(allreduce("d", 512));                  // would exceed 4 KiB with a and c
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 3);
  CHECK(list.responses[0].names == std::vector<std::string>{"a", "c"});
  CHECK(list.responses[1].names == std::vector<std::string>{"b"});
  CHECK(list.responses[2].names == std::vector<std::string>{"d"});
}

TEST_CASE("a retuned threshold groups the next dispatch and travels with its responses") {
  Coordinator c(options(2, 4096));
  auto submitBoth = [&](const OpRequest& r) {
    c.submit(0, r, 0, t0);
    c.submit(1, r, 0, t0);
  };
  submitBoth(allreduce("a", 256));
  submitBoth(allreduce("b", 256));
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].fusionThresholdBytes == 4096);
  c.retune(0, std::chrono::microseconds(0));
  submitBoth(allreduce("a", 256));
  submitBoth(allreduce("b", 256));
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 2);
  CHECK(list.responses[0].fusionThresholdBytes == 0);
  // A cycle time set by retune holds the next ready work.
  c.retune(1024, std::chrono::milliseconds(2));
  submitBoth(allreduce("c", 128));
  CHECK(c.dispatch(t0).responses.empty());
  CHECK(c.nextDeadline() == t0 + std::chrono::milliseconds(2));
  submitBoth(allreduce("d", 128));
  list = c.dispatch(t0 + std::chrono::milliseconds(2));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].names == std::vector<std::string>{"c", "d"});
  CHECK(list.responses[0].fusionThresholdBytes == 1024);
}

TEST_CASE("allreduces fuse only when dtype, op, scale factors, device and process set agree") {
  OpRequest base = allreduce("a", 256);
  REQUIRE(fusionKey(base));
  CHECK(fusionKey(base) == fusionKey(allreduce("b", 1000)));
  auto differs = [&](auto change) {
    OpRequest r = base;
    change(r);
    return fusionKey(r) != fusionKey(base);
  };
  CHECK(differs([](OpRequest& r) { r.tensors[0].dtype = DType::Float16; }));
  CHECK(differs([](OpRequest& r) { r.reduceOp = hvd::collectives::ReduceOp::Max; }));
  CHECK(differs([](OpRequest& r) { r.prescale = 0.5; }));
  CHECK(differs([](OpRequest& r) { r.postscale = 2.0; }));
  CHECK(differs([](OpRequest& r) { r.device.index = 0; }));
  CHECK(differs([](OpRequest& r) { r.processSet = 1; }));
  // Never fused: large tensors, mixed dtypes in one grouped request, other operations.
  CHECK_FALSE(fusionKey(allreduce("big", kFuseBelowBytes / 4)));
  OpRequest mixed = base;
  mixed.tensors.push_back({DType::Float64, {4}});
  CHECK_FALSE(fusionKey(mixed));
  OpRequest broadcast = base;
  broadcast.type = OpType::Broadcast;
  CHECK_FALSE(fusionKey(broadcast));
}

TEST_CASE("a cycle time holds ready work until the cycle has passed") {
  auto o = options(1, 1 << 20);
  o.cycleTime = std::chrono::milliseconds(2);
  Coordinator c(o);
  c.submit(0, allreduce("a", 4), 0, t0);
  CHECK(c.dispatch(t0 + std::chrono::milliseconds(1)).responses.empty());
  c.submit(0, allreduce("b", 4), 0, t0 + std::chrono::milliseconds(1));
  auto list = c.dispatch(t0 + std::chrono::milliseconds(2));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].names.size() == 2);
}

TEST_CASE("joined ranks are not waited for; they get shapes to add zeros; join reports the last") {
  Coordinator c(options(3));
  OpRequest join;
  join.type = OpType::Join;
  join.name = "join";
  c.submit(2, join, 0, t0);
  c.submit(0, allreduce("x", 4), 0, t0);
  c.submit(1, allreduce("x", 4), 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].forJoined.size() == 1);
  c.submit(0, join, 0, t0);
  c.submit(1, join, 0, t0);
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::JoinDone);
  CHECK(list.responses[0].value == 1);
}

TEST_CASE(
    "an operation other than allreduce fails as soon as one rank submits it while a rank "
    "of its set is joined") {
  // It could never run: the joined rank takes part in nothing but allreduce until every rank
  // has joined. Waiting for the other ranks could wait forever: their unnamed operations may
  // carry other names (they submitted different numbers before the join).
  Coordinator c(options(3));
  OpRequest join;
  join.type = OpType::Join;
  join.name = "join";
  OpRequest gather = allreduce("allgather.noname.0", 4);
  gather.type = OpType::Allgather;
  c.submit(0, gather, 0, t0);  // before the join: waits for the others
  CHECK(c.dispatch(t0).responses.empty());
  c.submit(1, join, 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Error);
  CHECK(list.responses[0].message ==
        "allgather \"allgather.noname.0\": ranks {1} have joined; only allreduce can run while "
        "ranks are joined");
  gather.name = "allgather.noname.1";
  c.submit(2, gather, 0, t0);  // after it: fails at once too
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Error);
  c.submit(0, allreduce("sum", 4), 0, t0);  // an allreduce still waits for rank 2
  CHECK(c.dispatch(t0).responses.empty());
}

TEST_CASE("stalls are reported with the missing ranks, then fail the job") {
  Coordinator c(options(3));
  c.submit(0, allreduce("slow", 4), 0, t0);
  c.submit(2, allreduce("slow", 4), 0, t0);
  CHECK(c.stallWarnings(t0 + seconds(4)).empty());
  auto warnings = c.stallWarnings(t0 + seconds(5));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "allreduce \"slow\" submitted by ranks {0,2}, waiting 5 s for ranks {1}");
  CHECK(c.stallWarnings(t0 + seconds(6)).empty());  // once per warning period
  CHECK(c.dispatch(t0 + seconds(19)).responses.empty());
  auto list = c.dispatch(t0 + seconds(20));
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Fatal);
  CHECK_THAT(list.responses[0].message, Catch::Contains("waiting 20 s for ranks {1}"));
}

TEST_CASE("a stall report names the hosts of the ranks it waits for") {
  CoordinatorOptions o = options(4);
  o.hostOfRank = {"node-a", "node-a", "node-b", "node-c"};
  Coordinator c(o);
  c.submit(0, allreduce("slow", 4), 0, t0);
  auto warnings = c.stallWarnings(t0 + seconds(5));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "allreduce \"slow\" submitted by ranks {0}, waiting 5 s for ranks {1,2,3} (on hosts "
        "node-a, node-b, node-c)");
  c.submit(1, allreduce("slow", 4), 0, t0);
  c.submit(3, allreduce("slow", 4), 0, t0);
  auto list = c.dispatch(t0 + seconds(20));
  REQUIRE(list.responses.size() == 1);
  CHECK_THAT(list.responses[0].message, Catch::Contains("for ranks {2} (on host node-b)"));
}

TEST_CASE("the response cache gives ids, replaces changed requests and resolves evicted ids") {
  CoordinatorCache cache(2);
  uint64_t a = cache.recordExecuted(allreduce("a", 4), 1);
  uint64_t b = cache.recordExecuted(allreduce("b", 4), 1);
  CHECK(cache.recordExecuted(allreduce("a", 4), 2) == a);   // touch: a is most recent
  uint64_t c = cache.recordExecuted(allreduce("c", 4), 3);  // evicts b
  CHECK(cache.takeEvicted() == std::vector<uint64_t>{b});
  CHECK(cache.resolve(b).name == "b");  // still resolvable until every rank saw list 3
  cache.allRanksHaveSeen(3);
  CHECK_THROWS(cache.resolve(b));
  uint64_t a2 = cache.recordExecuted(allreduce("a", 8), 4);  // changed shape: new id
  CHECK(a2 != a);
  CHECK(c != a2);
  WorkerCache worker;
  worker.learn(allreduce("a", 8), a2);
  CHECK(worker.idFor(allreduce("a", 8)) == a2);
  CHECK(worker.idFor(allreduce("a", 4)) == 0);
  worker.learn(allreduce("a", 8), a2);  // learning a known id again changes nothing
  CHECK(worker.idFor(allreduce("a", 8)) == a2);
  worker.forget(a2);
  CHECK(worker.idFor(allreduce("a", 8)) == 0);
  worker.learn(allreduce("a", 4), c);  // a changed request under a known name replaces it
  worker.learn(allreduce("a", 8), a2);
  CHECK(worker.idFor(allreduce("a", 4)) == 0);
  worker.forget(c);  // the replaced id no longer names anything
  CHECK(worker.idFor(allreduce("a", 8)) == a2);
}

TEST_CASE("control messages survive encoding, and a truncated one is an error") {
  RequestList l;
  l.responseListsSeen = 7;
  l.shutdown = true;
  Submission full;
  full.request = allreduce("grad", 12);
  full.request.prescale = 0.5;
  Submission cached;
  cached.cacheId = 42;
  l.submissions = {full, cached};
  auto back = RequestList::decode(l.encode());
  CHECK(back.responseListsSeen == 7);
  CHECK(back.shutdown);
  REQUIRE(back.submissions.size() == 2);
  CHECK(back.submissions[0].request == full.request);
  CHECK(back.submissions[1].cacheId == 42);
  CHECK(back.submissions[1].inlineData.empty());
  l.submissions[1].inlineData = std::string("\0\1\2\3", 4);
  CHECK(RequestList::decode(l.encode()).submissions[1].inlineData == l.submissions[1].inlineData);
  ResponseList responses;
  responses.seq = 3;
  Response inlined;
  inlined.names = {"loss"};
  inlined.cacheIds = {5};
  inlined.inlineResult = std::string("\0\0\200?", 4);
  inlined.fusionThresholdBytes = 3 << 20;
  responses.responses = {inlined};
  auto r = ResponseList::decode(responses.encode());
  REQUIRE(r.responses.size() == 1);
  CHECK(r.responses[0].inlineResult == inlined.inlineResult);
  CHECK(r.responses[0].fusionThresholdBytes == 3 << 20);
  CHECK(r.responses[0].names == inlined.names);
  std::string bytes = l.encode();
  bytes.pop_back();
  CHECK_THROWS_WITH(RequestList::decode(bytes), Catch::Contains("truncated"));
}

TEST_CASE("a control message with an unknown enum code is an error naming it") {
  // Found by test/fuzz/engine_messages_fuzzer.cc: an unknown dtype code used to decode, and the
  // coordinator's message about it threw InvalidArgument from dtypeSize instead.
  auto requestWith = [](auto change) {
    RequestList l;
    Submission s;
    s.request = allreduce("grad", 12);
    change(s.request);
    l.submissions = {s};
    return l.encode();
  };
  CHECK_THROWS_WITH(RequestList::decode(requestWith(
                        [](OpRequest& r) { r.tensors[0].dtype = static_cast<DType>(77); })),
                    Catch::Contains("unknown dtype code 77"));
  CHECK_THROWS_WITH(RequestList::decode(
                        requestWith([](OpRequest& r) { r.reduceOp = static_cast<ReduceOp>(99); })),
                    Catch::Contains("unknown reduce op code 99"));
  CHECK_THROWS_WITH(
      RequestList::decode(requestWith([](OpRequest& r) { r.type = static_cast<OpType>(200); })),
      Catch::Contains("unknown operation type code 200"));
  CHECK_NOTHROW(RequestList::decode(requestWith([](OpRequest& r) {
    r.tensors[0].dtype = DType::Bool;
    r.reduceOp = ReduceOp::Adasum;
    r.type = OpType::RemoveProcessSet;
  })));
  ResponseList responses;
  responses.responses.resize(1);
  responses.responses[0].kind = static_cast<ResponseKind>(9);
  CHECK_THROWS_AS(ResponseList::decode(responses.encode()), hvd::InternalError);
  CHECK_THROWS_WITH(ResponseList::decode(responses.encode()),
                    Catch::Contains("unknown response kind code 9"));
}

TEST_CASE("fusion chunks: same dtype, within the threshold, large tensors alone") {
  std::vector<TensorMeta> t = {{DType::Float32, {256}},
                               {DType::Float32, {256}},
                               {DType::Float64, {128}},
                               {DType::Float32, {1 << 20}},
                               {DType::Float32, {256}}};
  CHECK(planFusion(t, 1 << 20) == std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3}, {4}});
  CHECK(planFusion(t, 0) == std::vector<std::vector<std::size_t>>{{0}, {1}, {2}, {3}, {4}});
  CHECK(planFusion(t, 1024) == std::vector<std::vector<std::size_t>>{{0}, {1}, {2}, {3}, {4}});
}

TEST_CASE("the timeline file is valid JSON after every batch of events") {
  std::string path = "/tmp/hvd_timeline_unit_" + std::to_string(::getpid()) + ".json";
  Timeline timeline(0);
  timeline.start(path);
  auto parse = [&] {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  };
  CHECK(parse().empty());
  auto now = std::chrono::steady_clock::now();
  timeline.record({{"grad \"w\"", "ALLREDUCE", now, now + std::chrono::microseconds(5), 64}});
  CHECK(parse().size() == 2);  // the row's name, then the event
  timeline.record({{"grad \"w\"", "NEGOTIATE", now, now, 64}, {"b", "ALLREDUCE", now, now, 4}});
  auto events = parse();
  CHECK(events.size() == 5);
  CHECK(events[0]["args"]["name"] == "grad \"w\"");
  timeline.markCycle(now + std::chrono::microseconds(7));
  events = parse();
  REQUIRE(events.size() == 6);
  CHECK(events[5]["name"] == "CYCLE_START");
  CHECK(events[5]["ph"] == "i");
  CHECK(events[5]["s"] == "g");
  timeline.stop();
  std::remove(path.c_str());
}

TEST_CASE("operations waiting for a rank that shut down fail at once, naming it") {
  Coordinator c(options(3));
  c.submit(0, allreduce("never", 4), 0, t0);
  c.submit(2, allreduce("never", 4), 0, t0);
  c.submit(0, allreduce("other", 4), 0, t0);
  c.submit(1, allreduce("other", 4), 0, t0);
  CHECK(c.dispatch(t0).responses.empty());
  c.requestShutdown(1);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);  // "other" still waits for rank 2, which is alive
  CHECK(list.responses[0].kind == ResponseKind::Error);
  CHECK(list.responses[0].names == std::vector<std::string>{"never"});
  CHECK_THAT(list.responses[0].message,
             Catch::Contains("allreduce \"never\": ranks {1} shut down"));
  c.submit(2, allreduce("other", 4), 0, t0);
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Execute);
}

TEST_CASE("a join fails on every rank at once when a rank shuts down without joining") {
  OpRequest join;
  join.type = OpType::Join;
  join.name = "join";
  for (bool joinFirst : {true, false}) {
    INFO((joinFirst ? "join, then the shutdown" : "the shutdown, then join"));
    Coordinator c(options(3));
    if (joinFirst) c.submit(0, join, 0, t0);
    c.requestShutdown(1);
    if (!joinFirst) c.submit(0, join, 0, t0);
    auto list = c.dispatch(t0);
    REQUIRE(list.responses.size() == 1);
    CHECK(list.responses[0].kind == ResponseKind::Error);
    CHECK(list.responses[0].type == OpType::Join);
    CHECK(list.responses[0].message ==
          "join: ranks {1} shut down (their program finished or called shutdown) without "
          "joining, so the join of ranks {0} can never complete");
    // Rank 2 joining later fails as quickly; a join of every rank that is still there is never
    // reported as done.
    c.submit(2, join, 0, t0);
    list = c.dispatch(t0);
    REQUIRE(list.responses.size() == 1);
    CHECK_THAT(list.responses[0].message, Catch::Contains("the join of ranks {2} can never"));
    c.submit(0, join, 0, t0);
    c.submit(2, join, 0, t0);
    list = c.dispatch(t0);
    REQUIRE(list.responses.size() == 1);
    CHECK(list.responses[0].kind == ResponseKind::Error);
  }
  // A rank that joined and then shut down (from another thread) is not one that left.
  Coordinator c(options(2));
  c.submit(0, join, 0, t0);
  c.submit(1, join, 0, t0);
  c.requestShutdown(1);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::JoinDone);
}

namespace {

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> asFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace

TEST_CASE("the coordinator reduces allreduces every rank sent inline, with the scale factors") {
  Coordinator c(options(3, 1 << 20));
  OpRequest loss = allreduce("loss", 2);
  loss.prescale = 0.5;
  loss.postscale = 3.0;
  OpRequest acc = allreduce("acc", 1);
  acc.reduceOp = hvd::collectives::ReduceOp::Max;
  for (int r = 0; r < 3; ++r) {
    c.submit(r, loss, 0, t0, floats({r + 1.0f, 10.0f * (r + 1)}));
    c.submit(r, acc, 0, t0, floats({r == 1 ? 7.0f : 1.0f}));
  }
  auto list = c.dispatch(t0);
  // Not fused with each other although their fusion keys could match: no collective runs.
  REQUIRE(list.responses.size() == 2);
  CHECK(list.responses[0].kind == ResponseKind::Execute);
  CHECK(list.responses[0].names == std::vector<std::string>{"loss"});
  CHECK(asFloats(list.responses[0].inlineResult) == std::vector<float>{9.0f, 90.0f});
  CHECK(asFloats(list.responses[1].inlineResult) == std::vector<float>{7.0f});
  CHECK(list.responses[1].cacheIds.size() == 1);
}

TEST_CASE("an allreduce runs as a collective when a rank sent no inline data or has joined") {
  Coordinator c(options(3, 1 << 20));
  c.submit(0, allreduce("a", 1), 0, t0, floats({1}));
  c.submit(1, allreduce("a", 1), 0, t0);  // this rank's limit is lower
  c.submit(2, allreduce("a", 1), 0, t0, floats({1}));
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Execute);
  CHECK(list.responses[0].inlineResult.empty());

  OpRequest join;
  join.type = OpType::Join;
  join.name = "join";
  c.submit(2, join, 0, t0);
  c.submit(0, allreduce("b", 1), 0, t0, floats({1}));
  c.submit(1, allreduce("b", 1), 0, t0, floats({1}));
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].forJoined.size() == 1);
  CHECK(list.responses[0].inlineResult.empty());
}

TEST_CASE("an inline allreduce the dtype cannot reduce fails on every rank, naming it") {
  Coordinator c(options(2));
  OpRequest flags = allreduce("flags", 4, DType::Bool);
  flags.prescale = 2.0;
  c.submit(0, flags, 0, t0, std::string(4, '\1'));
  c.submit(1, flags, 0, t0, std::string(4, '\0'));
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Error);
  CHECK_THAT(list.responses[0].message, Catch::Contains("allreduce \"flags\"") &&
                                            Catch::Contains("cannot scale a bool tensor"));
}

TEST_CASE("reduceInline: an integer average divides exactly, toward zero, like the collective") {
  using hvd::collectives::ReduceOp;
  OpRequest r = allreduce("x", 3, DType::Int16);
  r.reduceOp = ReduceOp::Average;
  std::vector<int16_t> a{10, -7, 3}, b{20, 7, 4};
  std::string sa(reinterpret_cast<const char*>(a.data()), 6),
      sb(reinterpret_cast<const char*>(b.data()), 6);
  std::string out = reduceInline(r, {&sa, &sb});
  std::vector<int16_t> got(3);
  std::memcpy(got.data(), out.data(), 6);
  CHECK(got ==
        std::vector<int16_t>{15, 0, 3});  // integer division toward zero, like the collective
}

namespace {

OpRequest fence(OpType type, const std::string& name, std::vector<int32_t> setRanks = {}) {
  OpRequest r;
  r.type = type;
  r.name = name;
  r.setRanks = std::move(setRanks);
  return r;
}

}  // namespace

TEST_CASE("ranks waiting in different barriers or process-set changes fail at once, both named") {
  Coordinator c(options(3));
  c.submit(0, fence(OpType::Barrier, "barrier.noname.0"), 0, t0);
  c.submit(2, fence(OpType::Barrier, "barrier.noname.0"), 0, t0);
  // Rank 1 is still computing: it may yet call barrier.
  CHECK(c.dispatch(t0).responses.empty());
  c.submit(1, fence(OpType::RemoveProcessSet, "remove_process_set.noname.0", {1}), 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 2);
  std::set<std::string> failed;
  for (const auto& r : list.responses) {
    CHECK(r.kind == ResponseKind::Error);
    failed.insert(r.names.at(0));
    CHECK_THAT(r.message, Catch::Contains("ranks {0,2} wait in barrier") &&
                              Catch::Contains("ranks {1} wait in remove_process_set") &&
                              Catch::Contains("can ever complete"));
  }
  CHECK(failed == std::set<std::string>{"barrier.noname.0", "remove_process_set.noname.0"});
  // Nothing is left to stall; the ranks can go on.
  CHECK(c.dispatch(t0 + seconds(30)).responses.empty());
}

TEST_CASE("a fence is not failed while a rank it waits for is free or can still finish") {
  Coordinator c(options(3));
  c.submit(2, fence(OpType::Barrier, "first"), 0, t0);
  c.submit(1, fence(OpType::Barrier, "second"), 0, t0);
  // Rank 0 is free: it may call either barrier, and both can still complete.
  CHECK(c.dispatch(t0).responses.empty());
  c.submit(0, fence(OpType::Barrier, "first"), 0, t0);
  // "first" waits for rank 1, in "second", which waits for ranks 0 and 2, in "first": a cycle.
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 2);
  for (const auto& r : list.responses) CHECK(r.kind == ResponseKind::Error);
}

TEST_CASE("a barrier of a process set runs while a rank outside it waits in another fence") {
  Coordinator c(options(3));
  c.submit(0, fence(OpType::AddProcessSet, "add", {0, 1}), 0, t0);
  c.submit(1, fence(OpType::AddProcessSet, "add", {0, 1}), 0, t0);
  c.submit(2, fence(OpType::AddProcessSet, "add", {0, 1}), 0, t0);
  auto list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  int32_t set = list.responses[0].value;
  OpRequest inSet = fence(OpType::Barrier, "barrier.noname.0");
  inSet.processSet = set;
  c.submit(2, fence(OpType::Barrier, "global"), 0, t0);  // rank 2 waits for ranks 0 and 1
  c.submit(0, inSet, 0, t0);
  CHECK(c.dispatch(t0).responses.empty());  // rank 1 is free
  c.submit(1, inSet, 0, t0);
  list = c.dispatch(t0);
  REQUIRE(list.responses.size() == 1);
  CHECK(list.responses[0].kind == ResponseKind::Execute);
}

TEST_CASE("the timeline names rows and phases as Horovod's timeline does") {
  CHECK(timelineRow(OpType::Allreduce, "test_allreduce") == "allreduce.test_allreduce");
  CHECK(timelineRow(OpType::Allreduce, "allreduce.noname.3") == "allreduce.noname.3");
  CHECK(timelineRow(OpType::Broadcast, "allreduce.w") == "broadcast.allreduce.w");
  CHECK(timelinePhase(OpType::Allreduce, "NEGOTIATE") == "NEGOTIATE_ALLREDUCE");
  CHECK(timelinePhase(OpType::Reducescatter) == "REDUCESCATTER");
  CHECK(timelinePhase(OpType::Allgather, "HIERARCHICAL") == "HIERARCHICAL_ALLGATHER");
}
