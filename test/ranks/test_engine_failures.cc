// The engine's failures as every rank sees them: a peer that leaves a join, an engine that
// cannot start (and what each rank reports to the launcher), an allocation that fails.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "collectives/rendezvous/failure_reports.h"
#include "engine_ops.h"
#include "run_runtimes.h"
#include "test_time.h"

using namespace hvd;
using namespace hvd::runtime;
using hvd::test::allreduceOf;
using hvd::test::errorOf;
using hvd::test::named;
using hvd::test::runRuntimes;
using hvd::test::runtimeConfig;

TEST_CASE("a rank that shuts down without joining fails the join at once on every rank") {
  // Rank 1 runs its batches (the joined ranks add zeros) and shuts down as a finished program
  // does; ranks 0 and 2 wait in join, which could only complete once rank 1 joined.
  auto start = std::chrono::steady_clock::now();
  auto outcomes = runRuntimes(3, [&](Runtime& rt, int rank) -> std::string {
    if (rank == 1) {
      for (int b = 0; b < 5; ++b) {
        std::vector<float> v(5, 1.0f);
        rt.run(allreduceOf(named("batch", b), v));
        if (v[0] != 1.0f) return "batch " + std::to_string(b) + " gave " + std::to_string(v[0]);
      }
      return "";
    }
    Operation join;
    join.type = OpType::Join;
    return errorOf([&] { rt.run(join); });
  });
  auto took = std::chrono::steady_clock::now() - start;
  for (int rank : {0, 2})
    CHECK_THAT(outcomes[rank], Catch::Contains("join: ranks {1} (on host ") &&
                                   Catch::Contains(") shut down (their program finished or called "
                                                   "shutdown) without joining"));
  // Rank 1's shutdown says so too, so that its program does not end as if all went well.
  CHECK_THAT(outcomes[1], Catch::StartsWith("exception: join: ranks {1} (on host "));
  CHECK(took < test::scaled(std::chrono::seconds(5)));
}

TEST_CASE("a rank whose engine cannot start reports its own failure; its peer reports a peer's") {
  // Rank 0 cannot create its timeline; rank 1's engine is running by then and its link to
  // rank 0 breaks. Each tells the launcher which failure is whose through the store.
  rendezvous::InMemoryStore store;
  std::vector<std::string> outcome(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        auto rt = runtime::Runtime::create(
            runtimeConfig(r, 2, {{"HVD_TIMELINE", "/nonexistent/dir/timeline.json"}}), &store);
        std::vector<float> v(4, 1.0f);
        rt->run(allreduceOf("x", v));
      } catch (const std::exception& e) {
        outcome[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  CHECK_THAT(outcome[0], Catch::Contains("timeline: cannot create /nonexistent/dir/timeline.json"));
  CHECK_THAT(outcome[1], Catch::Contains("rank 0"));
  auto reports = rendezvous::readFailureReports(store, runtimeConfig(0, 2).jobId);
  REQUIRE(reports.size() == 2);
  CHECK(rendezvous::firstOwnFailure(reports) == 0);
  for (const auto& report : reports) {
    INFO(report.message);
    CHECK(report.causedByPeer == (report.rank == 1));
    if (report.rank == 0) CHECK_THAT(report.message, Catch::Contains("timeline: cannot create"));
  }
}

TEST_CASE("an allocation that fails says which operation, how big and which rank") {
  // Rank 1 claims 2^42 floats (16 TiB): the gathered output cannot be allocated on any rank,
  // and each says so instead of a bare std::bad_alloc. (Sanitizers' allocators abort on such a
  // size instead of throwing.)
  if (test::kSanitized) return;
  auto outcomes = runRuntimes(2, [](Runtime& rt, int rank) -> std::string {
    std::vector<float> v(4, 1.0f);
    Operation op;
    op.type = OpType::Allgather;
    op.name = "huge";
    op.inputs = {collectives::Tensor{
        v.data(), collectives::DType::Float32, {rank == 1 ? int64_t{1} << 42 : int64_t{4}}}};
    return errorOf([&] { rt.run(op); });
  });
  for (int rank : {0, 1}) {
    INFO(outcomes[rank]);
    CHECK_THAT(outcomes[rank],
               Catch::Contains(detail::concat("rank ", rank,
                                              ": out of memory (std::bad_alloc) running "
                                              "allgather \"huge\" (this rank's input: ")));
  }
  CHECK_THAT(outcomes[1], Catch::Contains("input: 17592186044416 bytes"));
}
