// Elastic workers as threads: each Runtime takes its placement from the round the test (in
// hvdrun's place) publishes, and a later round regroups the survivors under new ranks.
#include <catch2/catch.hpp>

#include <thread>

#include "collectives/rendezvous/elastic_rounds.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "runtime/runtime.h"
#include "test/ranks/test_time.h"

using namespace hvd;
using namespace hvd::runtime;
namespace elastic = hvd::rendezvous::elastic;

namespace {

Config elasticWorker(int id, int timeoutSeconds = 10) {
  // The environment's placement is the launch-time one; the round's replaces it.
  return Config::fromParams(
      params::ParamValues::fromMap({{"HVD_RANK", "0"},
                                    {"HVD_SIZE", "1"},
                                    {"HVD_RENDEZVOUS_ADDR", "127.0.0.1"},
                                    {"HVD_RENDEZVOUS_PORT", "1"},
                                    {"HVD_SECRET", "s"},
                                    {"HVD_JOB_ID", "job"},
                                    {"HVD_ELASTIC", "1"},
                                    {"HVD_WORKER_ID", std::to_string(id)},
                                    {"HVD_ELASTIC_TIMEOUT", std::to_string(timeoutSeconds)},
                                    {"HVD_TRANSPORT", "tcp"},
                                    {"HVD_OP_TIMEOUT", "10"},
                                    {"HVD_START_TIMEOUT", "10"}}));
}

Topology placed(int rank, int size) {
  Topology t;
  t.rank = rank;
  t.size = size;
  t.localRank = rank;
  t.localSize = size;
  t.hostname = "localhost";
  return t;
}

struct Outcome {
  int rank = -1, size = -1;
  int64_t round = -1, newest = -1;
  float sum = 0;
  std::string error;
};

// Runs one round: every listed worker inits, allreduces its id and shuts down.
std::vector<Outcome> runRound(rendezvous::Store& store, const std::vector<int>& ids) {
  std::vector<Outcome> out(ids.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ids.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        auto rt = Runtime::create(elasticWorker(ids[i]), store);
        out[i].rank = rt->topology().rank;
        out[i].size = rt->topology().size;
        out[i].round = rt->elasticRound();
        out[i].newest = rt->newestElasticRound();
        float v = static_cast<float>(ids[i]);
        rt->allreduce({&v, collectives::DType::Float32, {1}},
                      {&v, collectives::DType::Float32, {1}}, collectives::ReduceOp::Sum);
        out[i].sum = v;
        rt->shutdown();
      } catch (const std::exception& e) {
        out[i].error = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("elastic workers take their ranks from each round and regroup in the next") {
  rendezvous::InMemoryStore store;
  // Round 0: workers 0, 1, 2 with ranks in reverse.
  elastic::publishRound(store, "job", 0, {{0, placed(2, 3)}, {1, placed(1, 3)}, {2, placed(0, 3)}});
  auto first = runRound(store, {0, 1, 2});
  for (int id = 0; id < 3; ++id) {
    INFO("worker " << id);
    REQUIRE(first[id].error.empty());
    CHECK(first[id].rank == 2 - id);
    CHECK(first[id].size == 3);
    CHECK(first[id].round == 0);
    CHECK(first[id].newest == 0);
    CHECK(first[id].sum == 3.0f);
  }
  // Every worker announced that it waits for a round after 0, and joined 0.
  for (int id = 0; id < 3; ++id) {
    CHECK(elastic::waitingAfter(store, "job", id) == -1);
    CHECK(elastic::joinedRound(store, "job", id) == 0);
  }
  CHECK(elastic::joinedCount(store, "job", 0) == 3);
  CHECK(elastic::askingCount(store, "job", 0) == 0);

  // Round 1: worker 1 is gone; 0 and 2 regroup under new ranks.
  elastic::publishRound(store, "job", 1, {{0, placed(0, 2)}, {2, placed(1, 2)}});
  auto second = runRound(store, {0, 2});
  REQUIRE(second[0].error.empty());
  REQUIRE(second[1].error.empty());
  CHECK(second[0].rank == 0);
  CHECK(second[1].rank == 1);
  CHECK(second[0].size == 2);
  CHECK(second[0].round == 1);
  CHECK(second[0].sum == 2.0f);
  CHECK(elastic::waitingAfter(store, "job", 0) == 0);
  CHECK(elastic::askingCount(store, "job", 0) == 2);  // hvdrun reads one counter
  CHECK(elastic::joinedCount(store, "job", 1) == 2);

  // Worker 1 asks to join after round 0: the newest round leaves it out.
  auto removed = runRound(store, {1});
  CHECK_THAT(removed[0].error, Catch::Contains("elastic worker 1: round 1 leaves this worker out"));
}

TEST_CASE("an elastic worker waits for a new round no longer than HVD_ELASTIC_TIMEOUT") {
  rendezvous::InMemoryStore store;
  elastic::publishRound(store, "job", 0, {{0, placed(0, 1)}});
  {
    auto rt = Runtime::create(elasticWorker(0, 1), store);
    CHECK(rt->elasticRound() == 0);
    rt->shutdown();
  }
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(Runtime::create(elasticWorker(0, 1), store),
                    Catch::Contains("hvdrun formed no new round after round 0 within 1 s"));
  CHECK(std::chrono::steady_clock::now() - start < test::scaled(std::chrono::seconds(5)));
}

TEST_CASE("elastic placements survive the trip through the store") {
  Topology t = placed(3, 8);
  t.crossRank = 1;
  t.crossSize = 2;
  t.hostname = "node-7";
  Topology back = elastic::decodePlacement(elastic::encodePlacement(t));
  CHECK(back.rank == 3);
  CHECK(back.size == 8);
  CHECK(back.crossRank == 1);
  CHECK(back.crossSize == 2);
  CHECK(back.hostname == "node-7");
  CHECK_THROWS_AS(elastic::decodePlacement("3 2 0 1 0 1 host"), IoError);  // rank >= size
  CHECK_THROWS_AS(elastic::decodePlacement("garbage"), IoError);
}

TEST_CASE("workers connecting in a round that hvdrun gave up join the newer one at once") {
  // Round 0 has workers 0 and 1, but 1 never comes; hvdrun then forms round 1 without it.
  // Worker 0 is rank 1 first (it waits in the store for rank 0's address), then rank 0 (it
  // waits for rank 1 to connect): both waits end when round 1 appears, long before the
  // 30 s HVD_ELASTIC_TIMEOUT, and the same init goes on in round 1.
  for (int waiterRank : {1, 0}) {
    INFO("the waiting worker is rank " << waiterRank);
    rendezvous::InMemoryStore store;
    elastic::publishRound(store, "job", 0,
                          {{0, placed(waiterRank, 2)}, {1, placed(1 - waiterRank, 2)}});
    std::thread hvdrun([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      elastic::publishRound(store, "job", 1, {{0, placed(0, 1)}});
    });
    auto start = std::chrono::steady_clock::now();
    auto rt = Runtime::create(elasticWorker(0, 30), store);
    hvdrun.join();
    CHECK(std::chrono::steady_clock::now() - start < test::scaled(std::chrono::seconds(10)));
    CHECK(rt->elasticRound() == 1);
    CHECK(rt->topology().size == 1);
    CHECK(elastic::askingCount(store, "job", 0) == 1);  // it asked for the round after 0
    CHECK(elastic::joinedRound(store, "job", 0) == 1);
    rt->shutdown();
  }
}

TEST_CASE("a round names the address a host's workers listen on") {
  rendezvous::InMemoryStore store;
  elastic::publishRound(store, "job", 0, {{0, placed(0, 2)}, {1, placed(1, 2)}},
                        {{"localhost", "10.1.2.3"}});
  auto joined = elastic::joinNextRound(store, "job", 0, std::chrono::seconds(1));
  CHECK(joined.address == "10.1.2.3");
  Topology elsewhere = placed(1, 2);
  elsewhere.hostname = "node-2";
  elastic::publishRound(store, "job", 1, {{0, placed(0, 2)}, {1, elsewhere}},
                        {{"localhost", "10.1.2.3"}});
  CHECK(elastic::joinNextRound(store, "job", 1, std::chrono::seconds(1)).address.empty());
}
