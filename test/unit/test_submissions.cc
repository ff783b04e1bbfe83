// The engine's caller side on fake inputs: process sets (process_sets.h), the checks an
// operation passes on submission (admission.h) and the submission desk (submissions.h). No
// engine thread, no sockets.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "runtime/engine/admission.h"
#include "runtime/engine/submissions.h"

using namespace hvd::runtime;
using hvd::Error;
using hvd::InvalidArgument;

namespace {

float gValue = 1.0f;

Operation allreduce(std::string name, int32_t processSet = 0) {
  Operation op;
  op.type = OpType::Allreduce;
  op.name = std::move(name);
  op.inputs.push_back({&gValue, hvd::collectives::DType::Float32, {1}});
  op.processSet = processSet;
  return op;
}

Operation broadcast(int32_t root, int32_t processSet) {
  Operation op = allreduce("b", processSet);
  op.type = OpType::Broadcast;
  op.root = root;
  return op;
}

}  // namespace

TEST_CASE("process sets: the job is set 0; a set's communicator is only its members'") {
  ProcessSets sets(1, 4);
  REQUIRE(sets.ranks(0));
  CHECK(*sets.ranks(0) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(sets.ranks(7) == nullptr);
  sets.add(1, {0, 2}, nullptr);  // rank 1 is not a member: no communicator
  CHECK(sets.ids() == std::vector<int32_t>{0, 1});
  CHECK_FALSE(sets.contains(1, 1));
  CHECK(sets.contains(1, 2));
  int world = 0;
  auto* worldComm = reinterpret_cast<hvd::collectives::Comm*>(&world);
  CHECK(sets.commFor(0, worldComm) == worldComm);
  CHECK(sets.commFor(1, worldComm) == nullptr);
  CHECK(sets.commFor(9, worldComm) == nullptr);
  CHECK(sets.remove(1) == nullptr);
  CHECK(sets.ids() == std::vector<int32_t>{0});
}

TEST_CASE("admission names the operation, the set and the rank it refuses") {
  ProcessSets sets(1, 4);
  sets.add(3, {0, 2, 3}, nullptr);
  Operation unknown = allreduce("grad", 5);
  CHECK_THROWS_WITH(admitOperation(unknown, sets, 1, 4),
                    "allreduce \"grad\": process set 5 does not exist");
  Operation outside = allreduce("grad", 3);
  CHECK_THROWS_WITH(admitOperation(outside, sets, 1, 4),
                    Catch::Contains("allreduce \"grad\": rank 1 is not in process set 3"));
  Operation inside = allreduce("grad", 3);
  CHECK(admitOperation(inside, sets, 2, 4) == 3);
}

TEST_CASE("a process set's broadcast root is a global rank, translated to the set's") {
  ProcessSets sets(2, 4);
  sets.add(3, {0, 2, 3}, nullptr);
  Operation op = broadcast(3, 3);
  CHECK(admitOperation(op, sets, 2, 4) == 3);
  CHECK(op.root == 2);  // rank 3 is the set's third member
  Operation stranger = broadcast(1, 3);
  CHECK_THROWS_WITH(admitOperation(stranger, sets, 2, 4),
                    Catch::Contains("root_rank 1 is not a member of process set 3") &&
                        Catch::Contains("(root_rank is a global rank)"));
  Operation world = broadcast(1, 0);
  admitOperation(world, sets, 2, 4);
  CHECK(world.root == 1);  // the job's set counts global ranks already
}

TEST_CASE("Adasum's conditions are checked on submission") {
  ProcessSets sets(0, 3);
  Operation op = allreduce("g");
  op.reduceOp = ReduceOp::Adasum;
  CHECK_THROWS_AS(admitOperation(op, sets, 0, 3), InvalidArgument);  // 3 ranks: not 2^k
  Operation gather = allreduce("g");
  gather.type = OpType::Allgather;
  gather.reduceOp = ReduceOp::Adasum;
  CHECK_THROWS_WITH(admitOperation(gather, sets, 0, 4),
                    Catch::Contains("adasum applies to allreduce only"));
}

TEST_CASE("the desk names unnamed operations per type and set, and refuses a name in flight") {
  Submissions desk(0, 2, {}, nullptr);
  auto first = desk.submit(allreduce(""));
  CHECK(first.wakeEngine);
  auto second = desk.submit(allreduce(""));
  CHECK_FALSE(second.wakeEngine);  // the engine takes the queue whole
  desk.submit(allreduce("grad"));
  CHECK_THROWS_WITH(desk.submit(allreduce("grad")),
                    Catch::Contains("an operation named \"grad\" is already in flight on rank 0"));
  auto taken = desk.take();
  REQUIRE(taken.ops.size() == 3);
  CHECK(taken.ops[0]->request.name == "allreduce.noname.0");
  CHECK(taken.ops[1]->request.name == "allreduce.noname.1");
  CHECK(desk.submitted() == 3);
  desk.retire(taken.ops[2]->request);
  CHECK_NOTHROW(desk.submit(allreduce("grad")));
  for (auto& op : taken.ops) op->handle->complete({});
  for (auto& op : desk.take().ops) op->handle->complete({});
}

TEST_CASE("the desk refuses work after a join until it ends, after shutdown, after a failure") {
  Submissions desk(1, 2, {}, nullptr);
  Operation join;
  join.type = OpType::Join;
  desk.submit(std::move(join));
  CHECK_THROWS_WITH(desk.submit(allreduce("x")), Catch::Contains("this rank has called join"));
  desk.joinEnded();
  desk.submit(allreduce("x"));
  auto queued = desk.stop(std::make_exception_ptr(Error("rank 0 died")));
  CHECK(queued.size() == 2);  // the join and "x": the engine fails them
  for (auto& op : queued) op->handle->fail(std::make_exception_ptr(Error("stopped")));
  CHECK_THROWS_WITH(desk.submit(allreduce("y")), "allreduce \"y\": rank 0 died");
  Submissions closed(0, 1, {}, nullptr);
  CHECK(closed.requestShutdown());
  CHECK_FALSE(closed.requestShutdown());
  CHECK(closed.take().shutdownRequested);
  CHECK_THROWS_WITH(closed.submit(allreduce("z")), "allreduce \"z\": hvd is shut down");
  CHECK_FALSE(closed.waitEngineFinished(std::chrono::milliseconds(1)));
  closed.engineFinished();
  CHECK(closed.waitEngineFinished(std::chrono::milliseconds(1)));
}
