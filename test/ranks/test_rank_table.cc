// The rank table (collectives/rendezvous/rank_table.h), and what connecting N ranks costs the
// rendezvous: every request a rank makes is a round trip to the one server (hvdrun's, or rank
// 0's under srun), so the total must grow as N, not N².
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <thread>

#include "collectives/algorithms/barrier.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/rendezvous/rank_table.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;

namespace {

// Forwards to `inner` and counts the requests (calls), and the keys they name: a TcpStoreClient
// sends one frame per call, whatever the number of keys.
class CountingStore : public rendezvous::Store {
 public:
  explicit CountingStore(rendezvous::Store& inner) : inner_(inner) {}
  void set(const std::string& key, const rendezvous::Bytes& value) override {
    count(1);
    inner_.set(key, value);
  }
  std::optional<rendezvous::Bytes> get(const std::string& key) override {
    count(1);
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    count(keys.size());
    inner_.wait(keys, timeout);
  }
  std::vector<std::optional<rendezvous::Bytes>> multiGet(
      const std::vector<std::string>& keys) override {
    count(keys.size());
    return inner_.multiGet(keys);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    count(1);
    return inner_.add(key, delta);
  }
  int64_t requests() const { return requests_; }
  int64_t keys() const { return keys_; }

 private:
  void count(std::size_t keys) {
    ++requests_;
    keys_ += static_cast<int64_t>(keys);
  }
  rendezvous::Store& inner_;
  std::atomic<int64_t> requests_{0}, keys_{0};
};

rendezvous::Bytes bytes(const std::string& s) { return rendezvous::Bytes(s.begin(), s.end()); }

// Runs gatherRankTable for each rank in `ranks` (of `size`) on its own thread; returns each
// one's table, or its error's message in `errors`.
std::vector<std::vector<rendezvous::Bytes>> gatherOn(rendezvous::Store& store,
                                                     const std::vector<int>& ranks, int size,
                                                     std::chrono::milliseconds timeout,
                                                     std::vector<std::string>& errors) {
  std::vector<std::vector<rendezvous::Bytes>> tables(ranks.size());
  errors.assign(ranks.size(), "");
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        // Values of every length, empty and binary ones included.
        rendezvous::Bytes value(static_cast<std::size_t>(ranks[i]), uint8_t(ranks[i]));
        tables[i] = rendezvous::gatherRankTable(store, "x/", ranks[i], size, value, timeout);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return tables;
}

}  // namespace

TEST_CASE("every rank reads every rank's value from the one table rank 0 publishes") {
  int size = GENERATE(1, 2, 7);
  rendezvous::InMemoryStore store;
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  std::vector<std::string> errors;
  auto tables = gatherOn(store, ranks, size, test::kTestTimeout, errors);
  for (int r = 0; r < size; ++r) {
    REQUIRE(errors[r] == "");
    REQUIRE(tables[r].size() == static_cast<std::size_t>(size));
    for (int v = 0; v < size; ++v)
      CHECK(tables[r][v] == rendezvous::Bytes(static_cast<std::size_t>(v), uint8_t(v)));
  }
}

TEST_CASE("a rank table timeout names the ranks that never published") {
  auto timeout = std::chrono::milliseconds(300);
  std::vector<std::string> errors;
  SECTION("rank 0 and the others alike") {
    rendezvous::InMemoryStore store;
    gatherOn(store, {0, 1, 3}, 5, timeout, errors);
    for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("of ranks {2,4}"));
  }
  SECTION("rank 0 itself, when it is the one missing") {
    rendezvous::InMemoryStore store;
    gatherOn(store, {1, 2}, 3, timeout, errors);
    for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("of ranks {0}"));
  }
  SECTION("rank 0, when every rank published but no table came") {
    rendezvous::InMemoryStore store;
    store.set("x/0", bytes("a"));  // as if rank 0 had published and then stopped
    gatherOn(store, {1}, 2, timeout, errors);
    CHECK_THAT(errors[0], Catch::Contains("of ranks {0}"));
  }
}

TEST_CASE("a malformed rank table is refused naming its key") {
  auto table = rendezvous::encodeRankTable({bytes("ab"), bytes(""), bytes("c")});
  CHECK(rendezvous::decodeRankTable(table, "k").size() == 3);
  auto shorter = table;
  shorter.pop_back();
  CHECK_THROWS_WITH(rendezvous::decodeRankTable(shorter, "tcp/table"),
                    Catch::Contains("tcp/table") && Catch::Contains("announces 1 bytes"));
  auto longer = table;
  longer.push_back(0);
  CHECK_THROWS_WITH(rendezvous::decodeRankTable(longer, "k"), Catch::Contains("1 bytes after"));
  CHECK_THROWS_WITH(rendezvous::decodeRankTable(bytes("ab"), "k"),
                    Catch::Contains("end inside the count"));
}

TEST_CASE("connecting 64 ranks costs O(N) rendezvous requests: about 3 per rank and table") {
  auto transport = GENERATE(test::Transport::Tcp, test::Transport::Shm);
  constexpr int kRanks = 64;
  rendezvous::InMemoryStore inner;
  CountingStore store(inner);
  test::RankOptions options = test::over(transport);
  options.store = &store;
  options.shmRingBytes = 4096;  // 64 segments of 64 rings each
  auto errors = test::runEachRank(
      kRanks, [](Comm& comm) { barrier(comm); }, options);
  REQUIRE(test::messageOf(errors.first) == "");
  std::printf("%s connectAll at %d ranks: %lld rendezvous requests naming %lld keys\n",
              test::nameOf(transport), kRanks, static_cast<long long>(store.requests()),
              static_cast<long long>(store.keys()));
  INFO(test::nameOf(transport) << ": " << store.requests() << " requests naming " << store.keys()
                               << " keys for " << kRanks << " ranks");
  // One table exchange is about 3N requests naming 5N keys (each rank's set, rank 0's wait and
  // multi-get of N keys, then a wait and a get of the table per other rank); tcp makes one,
  // shm two (the segment names, then whether each rank mapped them). Reading every rank's key
  // was N(N-1)/2 gets for tcp and 2N² for shm: 2,143 and 8,448 requests at 64 ranks.
  int exchanges = transport == test::Transport::Tcp ? 1 : 2;
  CHECK(store.requests() <= exchanges * 4 * kRanks);
  CHECK(store.keys() <= exchanges * 6 * kRanks);
}
