#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "collectives/rendezvous/in_memory_store.h"
#include "common/error.h"
#include "hvd/hvd.h"
#include "runtime/runtime.h"
#include "test/ranks/run_runtimes.h"

// test/ranks/c_api_codes.c: hvd_allreduce called from C with any int as the dtype and op codes.
extern "C" hvd_status hvdTestAllreduceWithCodes(const void* in, void* out, size_t count, int dtype,
                                                int op);

using namespace hvd;
using namespace hvd::runtime;

TEST_CASE("runtimes of several ranks in one process allreduce and broadcast") {
  const int n = 3;
  rendezvous::InMemoryStore store;
  std::vector<std::vector<float>> sums(n);
  std::vector<int> roots(n);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Config c =
            Config::fromParams(params::ParamValues::fromMap({{"HVD_RANK", std::to_string(r)},
                                                             {"HVD_SIZE", std::to_string(n)},
                                                             {"HVD_RENDEZVOUS_ADDR", "127.0.0.1"},
                                                             {"HVD_RENDEZVOUS_PORT", "1"},
                                                             {"HVD_SECRET", "s"}}));
        auto rt = Runtime::create(c, store);
        std::vector<float> v = {1.0f * r, 2.0f};
        collectives::Tensor t{v.data(), collectives::DType::Float32, {2}};
        rt->allreduce(t, t, collectives::ReduceOp::Sum);
        sums[r] = v;
        int x = r == 1 ? 42 : -1;
        rt->broadcast({&x, collectives::DType::Int32, {1}}, 1);
        roots[r] = x;
        rt->barrier();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    REQUIRE(errors[r] == "");
    CHECK(sums[r] == std::vector<float>{3.0f, 6.0f});
    CHECK(roots[r] == 42);
  }
}

TEST_CASE("the C API runs as a single rank without a launcher and re-initialises") {
  for (const char* v :
       {"HVD_SIZE", "HVD_RANK", "HOROVOD_SIZE", "HOROVOD_RANK", "HVD_RENDEZVOUS_ADDR"})
    ::unsetenv(v);
  int value = -1;
  REQUIRE(hvd_rank(&value) == HVD_NOT_INITIALIZED);
  CHECK_THAT(hvd_last_error(), Catch::Contains("hvd_init"));
  for (int round = 0; round < 2; ++round) {
    REQUIRE(hvd_init() == HVD_SUCCESS);
    REQUIRE(hvd_init() == HVD_SUCCESS);  // a second init is a no-op
    REQUIRE(hvd_rank(&value) == HVD_SUCCESS);
    CHECK(value == 0);
    REQUIRE(hvd_size(&value) == HVD_SUCCESS);
    CHECK(value == 1);
    double in[3] = {1, 2, 3}, out[3] = {};
    REQUIRE(hvd_allreduce(in, out, 3, HVD_FLOAT64, HVD_SUM) == HVD_SUCCESS);
    CHECK((out[0] == 1 && out[1] == 2 && out[2] == 3));
    uint16_t u16[2] = {65000, 7}, u16out[2] = {};
    REQUIRE(hvd_allreduce(u16, u16out, 2, HVD_UINT16, HVD_MAX) == HVD_SUCCESS);
    CHECK((u16out[0] == 65000 && u16out[1] == 7));
    REQUIRE(hvd_broadcast(in, 3, HVD_FLOAT64, 1) == HVD_INVALID_ARGUMENT);
    CHECK_THAT(hvd_last_error(), Catch::Contains("root rank 1"));
    REQUIRE(hvdTestAllreduceWithCodes(in, out, 3, 99, HVD_SUM) == HVD_INVALID_ARGUMENT);
    CHECK_THAT(hvd_last_error(), Catch::Contains("invalid hvd_dtype 99"));
    REQUIRE(hvdTestAllreduceWithCodes(in, out, 3, HVD_FLOAT64, 99) == HVD_INVALID_ARGUMENT);
    CHECK_THAT(hvd_last_error(), Catch::Contains("invalid hvd_reduce_op 99"));
    REQUIRE(hvd_barrier() == HVD_SUCCESS);
    REQUIRE(hvd_shutdown() == HVD_SUCCESS);
  }
}

TEST_CASE("the C API reports a malformed environment naming the variable") {
  ::setenv("HVD_SIZE", "lots", 1);
  REQUIRE(hvd_init() == HVD_INVALID_ARGUMENT);
  CHECK_THAT(hvd_last_error(), Catch::Contains("HVD_SIZE='lots'"));
  ::unsetenv("HVD_SIZE");
}

TEST_CASE("HVD_TRANSPORT=shm refuses a job whose ranks are on several hosts, naming them") {
  auto outcomes = test::runRuntimes(
      2, [](Runtime&, int) -> std::string { return "created"; },
      {{"HVD_TRANSPORT", "shm"}, {"HVD_LOCAL_SIZE", "1"}, {"HVD_START_TIMEOUT", "2"}}, false);
  for (const auto& o : outcomes)
    CHECK_THAT(o, Catch::Contains("HVD_TRANSPORT=shm, but the job's 2 ranks are not all on one "
                                  "host (1 on "));
}

TEST_CASE("HVD_TRANSPORT=auto falls back to TCP on every rank when one cannot use shm") {
  // Rank 1's rings have another size, so it cannot map the others' segments.
  auto outcomes = test::runRuntimesWith(
      3,
      [](Runtime& rt, int rank) -> std::string {
        std::vector<float> v(1000, 1.0f + rank);
        collectives::Tensor t{v.data(), collectives::DType::Float32, {1000}};
        rt.allreduce(t, t, collectives::ReduceOp::Sum);
        return v[999] == 6.0f ? "" : "wrong sum " + std::to_string(v[999]);
      },
      [](int rank) {
        return test::oneHost(3, "auto", {{"HVD_SHM_BUFFER_BYTES", rank == 1 ? "8192" : "4096"}});
      });
  for (const auto& o : outcomes) CHECK(o == "");
}

TEST_CASE("HVD_SHM_BUFFER_BYTES must be a multiple of 64") {
  CHECK_THAT(test::errorOf([] {
               test::runtimeConfig(0, 2, {{"HVD_SHM_BUFFER_BYTES", "5000"}});
             }),
             Catch::Contains("HVD_SHM_BUFFER_BYTES=5000 is not a multiple of 64"));
}

namespace {

// Rank r of `n` on host "host<r / perHost>", with `variable` (HVD_HIERARCHICAL_ALLREDUCE or
// _ALLGATHER) from `on(r)`.
test::ParamsFor onHosts(int n, int perHost, std::function<bool(int)> on,
                        std::string variable = "HVD_HIERARCHICAL_ALLREDUCE") {
  return [=](int r) -> std::map<std::string, std::string> {
    int hosts = (n + perHost - 1) / perHost;
    int onHost = std::min(perHost, n - (r / perHost) * perHost);
    return {{"HVD_HOSTNAME", "host" + std::to_string(r / perHost)},
            {"HVD_LOCAL_RANK", std::to_string(r % perHost)},
            {"HVD_LOCAL_SIZE", std::to_string(onHost)},
            {"HVD_CROSS_RANK", std::to_string(r / perHost)},
            {"HVD_CROSS_SIZE", std::to_string(hosts)},
            {variable, on(r) ? "1" : "0"}};
  };
}

// Allreduces (sum) a small and a multi-segment tensor through the engine; "" when both are right.
std::string sumsAreRight(Runtime& rt, int rank, int n) {
  for (std::size_t count : {std::size_t{3}, std::size_t{300000}}) {
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = float(rank + 1) * float(i % 7);
    collectives::Tensor t{v.data(), collectives::DType::Float32, {int64_t(count)}};
    rt.allreduce(t, t, collectives::ReduceOp::Sum);
    for (std::size_t i = 0; i < count; ++i)
      if (v[i] != float(n * (n + 1) / 2) * float(i % 7))
        return "element " + std::to_string(i) + " of " + std::to_string(count) + " is " +
               std::to_string(v[i]);
  }
  return "";
}

// Allgathers rank + 1 rows (small, then multi-segment) through the engine; "" when right.
std::string gathersAreRight(Runtime& rt, int rank, int n) {
  for (int64_t width : {int64_t{2}, int64_t{200000}}) {
    std::vector<int32_t> mine((rank + 1) * width);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = int32_t(rank * 1000003 + i);
    std::vector<int32_t> all;
    collectives::Tensor out =
        rt.allgather({mine.data(), collectives::DType::Int32, {rank + 1, width}},
                     [&](const std::vector<int64_t>& shape) {
                       all.resize(shape[0] * shape[1]);
                       return static_cast<void*>(all.data());
                     });
    if (out.shape != std::vector<int64_t>{int64_t(n) * (n + 1) / 2, width}) return "shape";
    std::size_t k = 0;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < (r + 1) * width; ++i, ++k)
        if (all[k] != int32_t(r * 1000003 + i))
          return "element " + std::to_string(i) + " of rank " + std::to_string(r) + " is " +
                 std::to_string(all[k]);
  }
  return "";
}

}  // namespace

TEST_CASE("hierarchical allreduce runs through the runtime on two hosts of two ranks") {
  auto outcomes = test::runRuntimesWith(
      4, [](Runtime& rt, int rank) { return sumsAreRight(rt, rank, 4); },
      onHosts(4, 2, [](int) { return true; }));
  for (const auto& o : outcomes) CHECK(o == "");
}

TEST_CASE("hierarchical allreduce on uneven hosts stays flat and right") {
  auto outcomes = test::runRuntimesWith(
      3, [](Runtime& rt, int rank) { return sumsAreRight(rt, rank, 3); },
      onHosts(3, 2, [](int) { return true; }));
  for (const auto& o : outcomes) CHECK(o == "");
}

TEST_CASE(
    "hierarchical allgather runs through the runtime on two hosts of two ranks and on "
    "uneven hosts") {
  for (auto [n, perHost] : {std::pair{4, 2}, std::pair{3, 2}}) {
    auto outcomes = test::runRuntimesWith(
        n, [n = n](Runtime& rt, int rank) { return gathersAreRight(rt, rank, n); },
        onHosts(
            n, perHost, [](int) { return true; }, "HVD_HIERARCHICAL_ALLGATHER"));
    for (const auto& o : outcomes) CHECK(o == "");
  }
}

TEST_CASE("HVD_HIERARCHICAL_ALLGATHER set on some ranks only fails every rank naming them") {
  auto outcomes = test::runRuntimesWith(
      4, [](Runtime&, int) -> std::string { return "created"; },
      onHosts(
          4, 2, [](int r) { return r == 2; }, "HVD_HIERARCHICAL_ALLGATHER"),
      false);
  for (const auto& o : outcomes)
    CHECK_THAT(o, Catch::Contains("HVD_HIERARCHICAL_ALLGATHER differs between ranks: on for "
                                  "ranks {2}, off for ranks {0,1,3}"));
}

TEST_CASE("HVD_HIERARCHICAL_ALLREDUCE set on some ranks only fails every rank naming them") {
  auto outcomes = test::runRuntimesWith(
      4, [](Runtime&, int) -> std::string { return "created"; },
      onHosts(4, 2, [](int r) { return r != 1; }), false);
  for (const auto& o : outcomes)
    CHECK_THAT(o, Catch::Contains("HVD_HIERARCHICAL_ALLREDUCE differs between ranks: on for "
                                  "ranks {0,2,3}, off for ranks {1}"));
}

// Two hosts of two ranks, no hierarchy, with `extra` settings per rank on top.
test::ParamsFor twoHostsWith(std::function<std::map<std::string, std::string>(int)> extra) {
  auto base = onHosts(4, 2, [](int) { return false; });
  return [=](int r) {
    auto params = base(r);
    for (auto& [k, v] : extra(r)) params[k] = v;
    return params;
  };
}

TEST_CASE("across hosts, auto allreduce follows the network model and sums right") {
  auto outcomes = test::runRuntimesWith(
      4, [](Runtime& rt, int rank) { return sumsAreRight(rt, rank, 4); },
      twoHostsWith([](int) { return std::map<std::string, std::string>{}; }));
  for (const auto& o : outcomes) CHECK(o == "");
}

TEST_CASE(
    "an allreduce algorithm or network model that differs between ranks fails every rank "
    "naming them") {
  auto algorithm = test::runRuntimesWith(
      4, [](Runtime&, int) -> std::string { return "created"; }, twoHostsWith([](int r) {
        return std::map<std::string, std::string>{
            {"HVD_ALLREDUCE_ALGORITHM", r == 3 ? "ring" : "auto"}};
      }),
      false);
  for (const auto& o : algorithm)
    CHECK_THAT(o, Catch::Contains("HVD_ALLREDUCE_ALGORITHM differs between ranks: ranks {0,1,2} "
                                  "have rank 0's, ranks {3} another"));
  std::string path = "/tmp/hvd-test-model-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream file(path);
    file << R"({"inter_host_bytes_per_second": 1.25e9})";
  }
  auto model = test::runRuntimesWith(
      4, [](Runtime&, int) -> std::string { return "created"; }, twoHostsWith([&](int r) {
        return std::map<std::string, std::string>{{"HVD_NETWORK_MODEL", r >= 2 ? path : ""}};
      }),
      false);
  std::remove(path.c_str());
  for (const auto& o : model)
    CHECK_THAT(o, Catch::Contains("HVD_NETWORK_MODEL (the model's contents) differs between "
                                  "ranks: ranks {0,1} have rank 0's, ranks {2,3} another"));
}

namespace {

// A job whose rank 0 serves the rendezvous itself, as under srun or mpirun, with its ranks as
// threads of this process. Each rank logs (at info) into a stream of its own.
struct ServedJob {
  ServedJob(std::string id, int n) : id(std::move(id)), n(n), port(freePort()), logs(n) {}

  static uint16_t freePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
    ::close(fd);
    return ntohs(a.sin_port);
  }

  Config config(int rank) const {
    Config c = test::runtimeConfig(
        rank, n,
        test::oneHost(n, "tcp",
                      {{"HVD_JOB_ID", id}, {"HVD_LOG_LEVEL", "info"}, {"HVD_LOG_HIDE_TIME", "1"}}));
    c.rendezvousPort = port;
    c.externalLauncher = "a test";  // rank 0 serves the rendezvous
    return c;
  }

  // Creates every rank's Runtime at once (they rendezvous with each other); "" when all did.
  std::string create() {
    runtimes.resize(n);
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        errors[r] = test::errorOf([&] {
          auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logs[r]);
          runtimes[r] = Runtime::create(config(r), nullptr, sink);
        });
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (!e.empty()) return e;
    return "";
  }

  // Runs fn on every rank at once; "" when every rank returned "".
  std::string onEveryRank(const std::function<std::string(Runtime&, int)>& fn) {
    std::vector<std::string> outcomes(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        outcomes[r] = test::errorOf([&] {
          if (std::string o = fn(*runtimes[r], r); !o.empty()) throw Error(o);
        });
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r)
      if (!outcomes[r].empty()) return id + " rank " + std::to_string(r) + ": " + outcomes[r];
    return "";
  }

  std::string shutDown() {
    std::string outcome = onEveryRank([](Runtime& rt, int) {
      rt.shutdown();
      return std::string();
    });
    runtimes.clear();
    return outcome;
  }

  bool portOpen() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool open = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return open;
  }

  std::string id;
  int n;
  uint16_t port;
  std::vector<std::ostringstream> logs;  // declared before the runtimes, which log into them
  std::vector<std::unique_ptr<Runtime>> runtimes;
};

}  // namespace

TEST_CASE("runtimes of two jobs in one process keep their own rendezvous server and log prefix") {
  ServedJob a("job-a", 2), b("job-b", 3);
  std::string createdA, createdB;
  std::thread ta([&] { createdA = a.create(); }), tb([&] { createdB = b.create(); });
  ta.join();
  tb.join();
  REQUIRE(createdA == "");
  REQUIRE(createdB == "");
  REQUIRE((a.portOpen() && b.portOpen()));
  auto sums = [](int n) {
    return [n](Runtime& rt, int rank) { return sumsAreRight(rt, rank, n); };
  };
  REQUIRE(a.onEveryRank(sums(2)) == "");
  REQUIRE(b.onEveryRank(sums(3)) == "");

  // Destroying job A's runtimes (rank 0's first, without a shutdown) closes its server's port;
  // job B's goes on.
  a.runtimes[0].reset();
  CHECK_FALSE(a.portOpen());
  a.runtimes.clear();
  CHECK(b.portOpen());
  CHECK(b.onEveryRank(sums(3)) == "");

  // A collective shutdown closes the server too, and the job can join again on the same port.
  REQUIRE(b.shutDown() == "");
  CHECK_FALSE(b.portOpen());
  REQUIRE(b.create() == "");
  CHECK(b.onEveryRank(sums(3)) == "");
  REQUIRE(b.shutDown() == "");

  // Every rank logged with its own prefix, and only its own, into its own sink.
  for (ServedJob* job : {&a, &b})
    for (int r = 0; r < job->n; ++r) {
      std::string text = job->logs[r].str();
      std::string mine = detail::concat(" [rank ", r, "/", job->n, "] ");
      INFO(job->id << " rank " << r << " logged:\n" << text);
      REQUIRE(!text.empty());
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) CHECK_THAT(line, Catch::Contains(mine));
      if (r == 0)
        CHECK_THAT(text, Catch::Contains(detail::concat(
                             "serving the rendezvous at 127.0.0.1:", job->port, " for a test")));
    }
}
