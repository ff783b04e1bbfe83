#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <numeric>
#include <thread>

#include "engine_ops.h"
#include "run_runtimes.h"
#include "test/ranks/run_ranks.h"  // Milestone
#include "test/support/elements.h"
#include "test_time.h"

using namespace hvd;
using namespace hvd::runtime;
using hvd::collectives::DType;
using hvd::collectives::ReduceOp;
using hvd::collectives::Tensor;
using hvd::test::allreduceOf;
using hvd::test::errorOf;
using hvd::test::named;
using hvd::test::runRuntimes;
using hvd::test::runRuntimesWith;
using hvd::test::runtimeConfig;

namespace {

std::string expectAll(const std::vector<std::string>& outcomes, const std::string& needle) {
  for (std::size_t r = 0; r < outcomes.size(); ++r)
    if (outcomes[r].find(needle) == std::string::npos)
      return "rank " + std::to_string(r) + ": " + outcomes[r];
  return "";
}

std::string check(bool ok, const std::string& what) { return ok ? "" : what; }

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("ranks that submit in different orders get the same results") {
  const int n = 3, tensors = 12;
  auto outcomes = runRuntimes(n, [&](Runtime& rt, int rank) -> std::string {
    std::vector<std::vector<float>> data(tensors);
    std::vector<int> order(tensors);
    std::iota(order.begin(), order.end(), 0);
    std::rotate(order.begin(), order.begin() + rank * 5 % tensors, order.end());
    if (rank == 1) std::reverse(order.begin(), order.end());
    std::vector<Handle> handles(tensors);
    for (int i : order) {
      data[i].assign(1 + i * 100, static_cast<float>(rank + i));
      handles[i] = rt.engine().enqueue(allreduceOf(named("t", i), data[i]));
    }
    for (int i = 0; i < tensors; ++i) {
      handles[i]->wait(std::chrono::seconds(10));
      float want = static_cast<float>(n * i + n * (n - 1) / 2);
      for (float x : data[i])
        if (x != want) return "tensor " + std::to_string(i) + " got " + std::to_string(x);
    }
    return "";
  });
  for (const auto& o : outcomes) REQUIRE(o == "");
}

TEST_CASE("negotiation messages larger than the control links' buffers do not deadlock") {
  // 400 operations with 200-byte names make a request list and a response list of about 80 KB
  // each, more than a shared-memory control ring holds (64 KiB). Rank 1 submits two such
  // batches back to back, so it sends the second list while rank 0 sends the first batch's
  // responses: with sends that wait for the peer to read, both would wait on each other until
  // the op timeout. Rank 0 submits the second batch only after the first completed. The
  // tensors are too large to ride on negotiation, so every rank runs the collectives a response
  // list asks for: only once the whole list has reached it.
  const int n = 2, batch = 400, elements = 1024;
  auto longName = [](int b, int i) { return std::string(190, "ab"[b]) + "/" + std::to_string(i); };
  for (const char* transport : {"shm", "tcp"}) {
    INFO(transport);
    auto outcomes = runRuntimes(
        n,
        [&](Runtime& rt, int rank) -> std::string {
          std::vector<std::vector<float>> data(2 * batch, std::vector<float>(elements));
          std::vector<Handle> handles(2 * batch);
          auto submit = [&](int b) {
            for (int i = 0; i < batch; ++i) {
              auto& d = data[b * batch + i];
              std::fill(d.begin(), d.end(), static_cast<float>(rank + i));
              handles[b * batch + i] = rt.engine().enqueue(allreduceOf(longName(b, i), d));
            }
          };
          auto waitBatch = [&](int b) -> std::string {
            for (int i = 0; i < batch; ++i) {
              handles[b * batch + i]->wait(std::chrono::seconds(20));
              float got = data[b * batch + i][elements - 1];
              if (got != static_cast<float>(2 * i + 1))
                return "batch " + std::to_string(b) + " tensor " + std::to_string(i) + " got " +
                       std::to_string(got);
            }
            return "";
          };
          submit(0);
          if (rank == 1) submit(1);
          auto first = waitBatch(0);
          if (!first.empty()) return first;
          if (rank == 0) submit(1);
          return waitBatch(1);
        },
        hvd::test::oneHost(n, transport, {{"HVD_OP_TIMEOUT", "20"}}));
    for (const auto& o : outcomes) REQUIRE(o == "");
  }
}

TEST_CASE("every kind of disagreement fails on all ranks with the tensor and the ranks named") {
  struct Case {
    const char* property;
    std::function<void(Operation&, int rank)> skew;
    const char* expected;
  };
  std::vector<Case> cases = {
      {"dtype",
       [](Operation& op, int r) {
         if (r == 1) op.inputs[0].dtype = DType::Int32;
       },
       "dtype mismatch: ranks {0,2} float32, rank {1} int32"},
      {"shape",
       [](Operation& op, int r) {
         if (r == 2) op.inputs[0].shape = {2, 2};
       },
       "shape mismatch: ranks {0,1} [4], rank {2} [2,2]"},
      {"op",
       [](Operation& op, int r) {
         if (r == 0) op.reduceOp = ReduceOp::Max;
       },
       "reduce op mismatch: rank {0} max, ranks {1,2} sum"},
      {"prescale", [](Operation& op, int r) { op.prescale = r == 2 ? 0.5 : 1.0; },
       "prescale factor mismatch: ranks {0,1} 1, rank {2} 0.5"},
      {"postscale", [](Operation& op, int r) { op.postscale = 1.0 + r; },
       "postscale factor mismatch: rank {0} 1, rank {1} 2, rank {2} 3"},
      {"type",
       [](Operation& op, int r) {
         if (r == 1) op.type = OpType::Broadcast;
       },
       "operation mismatch: ranks {0,2} allreduce, rank {1} broadcast"},
      {"root",
       [](Operation& op, int r) {
         op.type = OpType::Broadcast;
         op.root = r == 0 ? 1 : 0;
       },
       "root rank mismatch: rank {0} 1, ranks {1,2} 0"},
  };
  for (const auto& c : cases) {
    INFO(c.property);
    auto outcomes = runRuntimes(3, [&](Runtime& rt, int rank) -> std::string {
      std::vector<float> v(4, 1.0f);
      Operation op = allreduceOf("grad.w", v);
      c.skew(op, rank);
      std::string error = errorOf([&] { rt.run(op); });
      // The job goes on: the next operation works.
      std::vector<float> ok(2, 1.0f);
      rt.run(allreduceOf("after", ok));
      return error + (ok[0] == 3.0f ? "" : " (next allreduce wrong)");
    });
    REQUIRE(expectAll(outcomes, c.expected) == "");
    REQUIRE(expectAll(outcomes, "\"grad.w\"") == "");
  }
}

TEST_CASE("a second operation with a name already in flight fails on submission") {
  // Rank 1 submits "dup" only once rank 0 has tried it twice: rank 0's first one is surely
  // still in flight then.
  std::promise<void> triedTwice;
  std::shared_future<void> rank0Tried = triedTwice.get_future().share();
  auto outcomes = runRuntimes(2, [&](Runtime& rt, int rank) -> std::string {
    std::vector<float> a(8, 1.0f), b(8, 1.0f);
    if (rank == 1 && rank0Tried.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
      return "rank 0 never tried";
    Handle first = rt.engine().enqueue(allreduceOf("dup", a));
    std::string error;
    if (rank == 0) {
      error = errorOf([&] { rt.engine().enqueue(allreduceOf("dup", b)); });
      triedTwice.set_value();
    }
    first->wait(std::chrono::seconds(10));
    if (rank == 0)
      return check(error.find("already in flight on rank 0") != std::string::npos, error);
    return check(a[0] == 2.0f, "wrong result");
  });
  for (const auto& o : outcomes) REQUIRE(o == "");
}

TEST_CASE("join lets ranks with fewer batches finish; joined ranks contribute zeros") {
  const int n = 3;
  auto outcomes = runRuntimes(n, [&](Runtime& rt, int rank) -> std::string {
    int batches = rank + 1;  // rank 2 has the most
    std::string got;
    for (int b = 0; b < batches; ++b) {
      std::vector<float> v(5, 1.0f);
      rt.run(allreduceOf(named("batch", b), v));
      // Batch b is submitted by the ranks with more than b batches; the others add zeros.
      float want = static_cast<float>(n - b);
      if (v[0] != want) got += " batch" + std::to_string(b) + "=" + std::to_string(v[0]);
    }
    Operation join;
    join.type = OpType::Join;
    int last = rt.run(join).value;
    // Rank 1's batch 1 needs rank 0 joined, and rank 2's batch 2 needs rank 1 joined: rank 2
    // joins last, whatever the timing.
    return got + check(last == 2, "join returned " + std::to_string(last)) +
           " last=" + std::to_string(last);
  });
  for (const auto& o : outcomes) REQUIRE(o.rfind(" last=", 0) == 0);
  // Every rank gets the same last rank.
  REQUIRE(outcomes[0] == outcomes[1]);
  REQUIRE(outcomes[1] == outcomes[2]);
}

TEST_CASE("process sets: static and dynamic, operations scoped to them, invalid sets rejected") {
  auto outcomes = runRuntimes(
      4,
      [](Runtime& rt, int rank) -> std::string {
        std::string out;
        // Static set 1 = {0,1}, 2 = {2,3} from HVD_PROCESS_SETS.
        int32_t mine = rank < 2 ? 1 : 2;
        std::vector<float> v(3, static_cast<float>(rank));
        Operation op = allreduceOf("ps", v);
        op.processSet = mine;
        rt.run(op);
        float want = rank < 2 ? 1.0f : 5.0f;
        out += check(v[0] == want, " static set sum " + std::to_string(v[0]));
        out += check(errorOf([&] {
                       Operation o = op;
                       o.processSet = 3 - mine;
                       rt.run(o);
                     }).find("is not in process set") != std::string::npos,
                     " no membership error");
        // Dynamic: {1,2,3}, collective over every rank.
        Operation add;
        add.type = OpType::AddProcessSet;
        add.name = "add.odd";
        add.setRanks = {1, 2, 3};
        int32_t id = rt.run(add).value;
        out += check(id == 3, " new id " + std::to_string(id));
        if (rank > 0) {
          std::vector<float> w(2, 1.0f);
          Operation o = allreduceOf("dyn", w);
          o.processSet = id;
          rt.run(o);
          out += check(w[0] == 3.0f, " dynamic sum " + std::to_string(w[0]));
        }
        Operation dup = add;
        dup.name = "add.again";
        out += check(
            errorOf([&] { rt.run(dup); }).find("already form process set 3") != std::string::npos,
            " duplicate set accepted");
        // Invalid ranks fail on submission, before any rank could crash on them.
        Operation bad = add;
        bad.setRanks = {0, 0};
        out += check(
            errorOf([&] { rt.engine().enqueue(bad); }).find("appears twice") != std::string::npos,
            " duplicate rank accepted");
        bad.setRanks = {0, 4};
        out += check(errorOf([&] { rt.engine().enqueue(bad); }).find("outside the job's ranks") !=
                         std::string::npos,
                     " out-of-range rank accepted");
        bad.setRanks = {};
        out += check(errorOf([&] { rt.engine().enqueue(bad); }).find("at least one rank") !=
                         std::string::npos,
                     " empty set accepted");
        Operation remove;
        remove.type = OpType::RemoveProcessSet;
        remove.name = "remove.odd";
        remove.setRanks = {id};
        rt.run(remove);
        out += check(!rt.engine().processSet(id).has_value(), " set still there");
        return out;
      },
      {{"HVD_PROCESS_SETS", "0,1;2,3"}});
  for (const auto& o : outcomes) REQUIRE(o == "");
  REQUIRE_THROWS_WITH(runtimeConfig(0, 4, {{"HVD_PROCESS_SETS", "0,1,1"}}),
                      Catch::Contains("names a rank twice"));
  REQUIRE_THROWS_WITH(runtimeConfig(0, 4, {{"HVD_PROCESS_SETS", "0,4"}}),
                      Catch::Contains("out of range [0, 3]"));
}

TEST_CASE("unnamed operations in a process set leave the global set's names in step") {
  // Ranks 0 and 2 run unnamed allreduces in their set that rank 1 never sees; the next unnamed
  // global allreduce must still get the same name on every rank (it used to be "noname.2" on
  // ranks 0 and 2 and "noname.0" on rank 1, and waited until the op timeout).
  auto outcomes = runRuntimes(3,
                              [](Runtime& rt, int rank) -> std::string {
                                std::string out;
                                if (rank != 1)
                                  for (int i = 0; i < 2; ++i) {
                                    std::vector<float> v(2, 1.0f);
                                    Operation op = allreduceOf("", v);
                                    op.processSet = 1;
                                    op.reduceOp = ReduceOp::Sum;
                                    rt.run(op);
                                    out += check(v[0] == 2.0f, " set sum " + std::to_string(v[0]));
                                  }
                                std::vector<float> w(2, 1.0f);
                                Operation op = allreduceOf("", w);
                                op.reduceOp = ReduceOp::Sum;
                                out += errorOf([&] { rt.run(op); });
                                out += check(w[0] == 3.0f, " global sum " + std::to_string(w[0]));
                                return out;
                              },
                              {{"HVD_PROCESS_SETS", "0,2"}, {"HVD_OP_TIMEOUT", "5"}});
  for (const auto& o : outcomes) REQUIRE(o == "");
}

TEST_CASE("a stalled operation is reported with the missing rank and then fails the job") {
  auto start = std::chrono::steady_clock::now();
  test::Milestone failed[2];  // ranks 0 and 1's "stuck" has failed
  auto outcomes = runRuntimes(
      3,
      [&failed](Runtime& rt, int rank) -> std::string {
        std::vector<float> v(4, 1.0f);
        if (rank == 2) {
          // Never submits "stuck"; its own next operation, once the others' has failed, fails
          // with the report too.
          failed[0].await();
          failed[1].await();
          return errorOf([&] { rt.run(allreduceOf("later", v)); });
        }
        test::Milestone::EndOf end{failed[rank]};
        return errorOf([&] { rt.run(allreduceOf("stuck", v)); });
      },
      {{"HVD_STALL_CHECK_TIME_SECONDS", "1"}, {"HVD_STALL_SHUTDOWN_TIME_SECONDS", "2"}}, false);
  auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(expectAll(outcomes, "allreduce \"stuck\" submitted by ranks {0,1}") == "");
  REQUIRE(expectAll(outcomes, "for ranks {2}") == "");
  REQUIRE(took < test::scaled(std::chrono::seconds(8)));
}

TEST_CASE("operations after a peer died fail with the root cause") {
  std::string transport = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO(transport);
  auto outcomes = runRuntimes(
      3,
      [](Runtime& rt, int rank) -> std::string {
        std::vector<float> v(4, 1.0f);
        rt.run(allreduceOf("warmup", v));
        if (rank == 1) return "gone";  // the Runtime is destroyed without shutdown
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return errorOf([&] { rt.run(allreduceOf("after.death", v)); });
      },
      test::oneHost(3, transport), false);
  REQUIRE(outcomes[1] == "gone");
  for (int r : {0, 2}) {
    INFO(outcomes[r]);
    CHECK(outcomes[r].find("rank 1") != std::string::npos);
    CHECK(outcomes[r].find("broke") != std::string::npos);
  }
}

TEST_CASE("shutdown then create again gives a working runtime and leaves no thread or socket") {
  std::string transport = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO(transport);
  // ThreadSanitizer starts a thread of its own at the process's first pthread_create: one
  // thread started and joined first keeps it out of the count.
  std::thread([] {}).join();
  int fdsBefore = countEntries("/proc/self/fd");
  int threadsBefore = countEntries("/proc/self/task");
  for (int round = 0; round < 3; ++round) {
    auto outcomes = runRuntimes(
        2,
        [&](Runtime& rt, int rank) -> std::string {
          std::vector<float> v(4, static_cast<float>(rank + round));
          rt.run(allreduceOf("r", v));
          return check(v[0] == static_cast<float>(1 + 2 * round), "wrong sum");
        },
        test::oneHost(2, transport));
    for (const auto& o : outcomes) REQUIRE(o == "");
  }
  CHECK(countEntries("/proc/self/fd") == fdsBefore);
  CHECK(countEntries("/proc/self/task") == threadsBefore);
}

TEST_CASE(
    "allgather, broadcast, alltoall, reducescatter, grouped allreduce and barrier through "
    "the engine") {
  std::string transport = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO(transport);
  auto outcomes = runRuntimes(
      3,
      [](Runtime& rt, int rank) -> std::string {
        std::string out;
        std::vector<int32_t> rows(static_cast<std::size_t>(rank + 1) * 2, rank);
        Operation ag;
        ag.type = OpType::Allgather;
        ag.name = "ag";
        ag.inputs = {Tensor{rows.data(), DType::Int32, {rank + 1, 2}}};
        OpResult r = rt.run(ag);
        const Tensor& t = r.outputs.at(0);
        out += check(t.shape == std::vector<int64_t>{6, 2}, " allgather shape");
        auto* got = static_cast<int32_t*>(t.data);
        out += check(got[0] == 0 && got[2] == 1 && got[11] == 2, " allgather values");

        std::vector<double> b(3, rank == 2 ? 7.0 : 0.0);
        rt.broadcast({b.data(), DType::Float64, {3}}, 2);
        out += check(b[2] == 7.0, " broadcast");

        std::vector<float> a(3, 1.0f), c(5, 2.0f);
        Operation grouped;
        grouped.type = OpType::Allreduce;
        grouped.name = "group";
        grouped.inputs = {Tensor{a.data(), DType::Float32, {3}},
                          Tensor{c.data(), DType::Float32, {5}}};
        grouped.reduceOp = ReduceOp::Average;
        rt.run(grouped);
        out += check(a[0] == 1.0f && c[4] == 2.0f, " grouped average");

        std::vector<int64_t> x(6, rank);
        Operation a2a;
        a2a.type = OpType::Alltoall;
        a2a.name = "a2a";
        a2a.inputs = {Tensor{x.data(), DType::Int64, {6}}};
        a2a.splits = {1, 2, 3};
        OpResult ar = rt.run(a2a);
        int64_t wantRows = rank + 1;
        out +=
            check(ar.receivedSplits.at(0) == std::vector<int64_t>(3, wantRows), " alltoall splits");
        out += check(ar.outputs.at(0).shape[0] == 3 * wantRows, " alltoall rows");

        std::vector<float> rs(6, 1.0f);
        Operation red;
        red.type = OpType::Reducescatter;
        red.name = "rs";
        red.inputs = {Tensor{rs.data(), DType::Float32, {6}}};
        OpResult rr = rt.run(red);
        out += check(
            rr.outputs.at(0).shape[0] == 2 && static_cast<float*>(rr.outputs.at(0).data)[1] == 3.0f,
            " reducescatter");

        Operation scalar = red;
        scalar.name = "scalar";
        scalar.inputs = {Tensor{rs.data(), DType::Float32, {}}};
        out += check(
            errorOf([&] { rt.run(scalar); }).find("cannot scatter a scalar") != std::string::npos,
            " scalar reducescatter accepted");
        // Refused on submission, naming the tensor, before any rank negotiates it.
        Operation scalarGather;
        scalarGather.type = OpType::Allgather;
        scalarGather.name = "loss";
        scalarGather.inputs = {Tensor{rs.data(), DType::Float32, {}}};
        out += check(errorOf([&] {
                       rt.engine().enqueue(scalarGather);
                     }).find("allgather \"loss\": cannot concatenate scalars") != std::string::npos,
                     " scalar allgather accepted");
        Operation badRoot;
        badRoot.type = OpType::Broadcast;
        badRoot.name = "badroot";
        badRoot.root = 5;
        badRoot.inputs = {Tensor{b.data(), DType::Float64, {3}}};
        out += check(errorOf([&] { rt.run(badRoot); }).find("root rank 5 is outside [0, 3)") !=
                         std::string::npos,
                     " bad root accepted");
        rt.barrier();
        return out;
      },
      test::oneHost(3, transport));
  for (const auto& o : outcomes) REQUIRE(o == "");
}

// The spin only changes how a waiting thread waits; every setting must give the same results,
// for messages under the spin's size limit and for ring-sized ones above it.
TEST_CASE("the engine gives the same results with the spin off, default and long") {
  const int n = 3;
  for (const char* spin : {"0", "30", "5000"}) {
    auto outcomes = runRuntimes(n,
                                [&](Runtime& rt, int rank) -> std::string {
                                  for (int step = 0; step < 20; ++step) {
                                    std::vector<float> small(1, static_cast<float>(rank + step));
                                    std::vector<float> large(300000, static_cast<float>(rank));
                                    auto a = rt.engine().enqueue(allreduceOf("small", small));
                                    auto b = rt.engine().enqueue(allreduceOf("large", large));
                                    a->wait(std::chrono::seconds(10));
                                    b->wait(std::chrono::seconds(10));
                                    if (small[0] != static_cast<float>(3 + 3 * step))
                                      return "small: " + std::to_string(small[0]);
                                    for (float x : large)
                                      if (x != 3.0f) return "large: " + std::to_string(x);
                                  }
                                  return "";
                                },
                                {{"HVD_SPIN_MICROSECONDS", spin}});
    for (const auto& o : outcomes) REQUIRE(o == "");
  }
}

namespace {

// Every dtype and op on 1 and 17 elements (at most 136 bytes, under the default inline limit),
// in and out of place, then a float32 Sum with scale factors; checks each result against the
// closed form. Returns what went wrong, or "" and the number of operations run.
std::string smallAllreduceMatrix(Runtime& rt, int rank, int n, int& operations) {
  using namespace hvd::test;
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max,
                          ReduceOp::Product};
  operations = 0;
  for (DType t : collectives::allDTypes())
    for (ReduceOp reduceOp : ops) {
      if (t == DType::Bool && reduceOp == ReduceOp::Average) continue;
      for (int64_t count : {1, 17})
        for (bool inPlace : {true, false}) {
          std::size_t bytes = count * hvd::collectives::dtypeSize(t);
          std::vector<std::byte> in(bytes), out(bytes);
          for (int64_t i = 0; i < count; ++i)
            setElement(in.data(), t, i, fillValue(t, reduceOp, rank, i));
          Operation op;
          op.name = detail::concat("m.", dtypeName(t), ".", reduceOpName(reduceOp), ".", count);
          op.reduceOp = reduceOp;
          op.inputs = {Tensor{in.data(), t, {count}}};
          if (!inPlace) op.outputs = {Tensor{out.data(), t, {count}}};
          rt.run(op);
          ++operations;
          const void* result = inPlace ? in.data() : out.data();
          for (int64_t i = 0; i < count; ++i) {
            double got = getElement(result, t, i), want = expectedValue(t, reduceOp, n, i);
            if (!close(got, want, t))
              return detail::concat(op.name, inPlace ? " in place" : " out of place", ": element ",
                                    i, " is ", got, ", want ", want);
          }
        }
    }
  std::vector<float> v{static_cast<float>(rank + 1), 1.0f};
  Operation scaled = allreduceOf("scaled", v);
  scaled.prescale = 0.5;
  scaled.postscale = 4.0;
  rt.run(scaled);
  ++operations;
  float want = 2.0f * n * (n + 1) / 2;
  if (v[0] != want || v[1] != 2.0f * n)
    return detail::concat("scaled: ", v[0], ",", v[1], ", want ", want, ",", 2.0f * n);
  return "";
}

// Runs smallAllreduceMatrix on 3 ranks, rank r with paramsFor(r); returns each rank's
// outcome, its engine counters afterwards and the number of operations it ran.
struct MatrixRun {
  std::vector<std::string> outcomes;
  std::vector<EngineStats> stats;
  std::vector<int> operations;
};
MatrixRun runSmallAllreduceMatrix(const hvd::test::ParamsFor& paramsFor) {
  const int n = 3;
  MatrixRun run{{}, std::vector<EngineStats>(n), std::vector<int>(n)};
  run.outcomes = runRuntimesWith(
      n,
      [&](Runtime& rt, int rank) -> std::string {
        std::string why = smallAllreduceMatrix(rt, rank, n, run.operations[rank]);
        run.stats[rank] = rt.engine().stats();
        return why;
      },
      paramsFor);
  return run;
}

}  // namespace

TEST_CASE("small allreduces reduced by the coordinator: every dtype and op, in and out of place") {
  auto run = runSmallAllreduceMatrix([](int) { return std::map<std::string, std::string>{}; });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(run.outcomes[r] == "");
    // No collective ran: each result came with the coordinator's response.
    CHECK(run.stats[r].inlineAllreduces == static_cast<uint64_t>(run.operations[r]));
    CHECK(run.stats[r].collectives == 0);
  }
}

TEST_CASE("small allreduces run as collectives when a rank does not send them inline") {
  // Rank 1 has inline allreduces off: the others' inline data cannot be used.
  auto run = runSmallAllreduceMatrix([](int rank) -> std::map<std::string, std::string> {
    if (rank == 1) return {{"HVD_INLINE_ALLREDUCE_BYTES", "0"}};
    return {};
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(run.outcomes[r] == "");
    CHECK(run.stats[r].inlineAllreduces == 0);
    CHECK(run.stats[r].collectives == static_cast<uint64_t>(run.operations[r]));
  }
}
