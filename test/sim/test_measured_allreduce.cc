// Auto's pick from the table hvd-bench calibrate measured on the machine or the job's hosts
// (NetworkModel::measuredAllreduce): at, between and beyond the measured sizes, a crossover that
// moves with another machine's table, a table across hosts serving its layout alone, the
// fallback where no table matches, and the tables' JSON.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/cost_model.h"
#include "collectives/transport/comm.h"
#include "common/error.h"

using namespace hvd;
using namespace hvd::collectives;

TEST_CASE("within one host, auto picks from the table measured for the link and the ranks",
          "[cost_model]") {
  // A TCP loopback as calibrate measured one: recursive doubling while latency dominates, then
  // Rabenseifner's halves, then the ring's pipeline (seconds in microseconds' units here).
  MeasuredAllreduce tcp{"tcp", 2, {64e3, 1e6, 4e6}, {}};
  tcp.seconds["recursive_doubling"] = {10, 400, 2500};
  tcp.seconds["rabenseifner"] = {20, 200, 1800};
  tcp.seconds["ring"] = {25, 300, 1000};
  NetworkModel model;
  model.ranksPerHost = 4;
  model.setMeasured(tcp);
  AllreduceOptions o;
  o.model = &model;
  o.ringThresholdBytes = 128 * 1024;
  auto comm = [](int size, const char* link) {
    auto c = std::make_unique<Comm>(0, size, std::vector<std::shared_ptr<Connection>>(size),
                                    std::chrono::milliseconds(1000), nullptr);
    c->setLinkName(link);
    return c;
  };
  auto owned = comm(2, "tcp");
  Comm& pair = *owned;
  CHECK(chooseAllreduceAlgorithm(pair, 4, o) == AllreduceAlgorithm::RecursiveDoubling);
  CHECK(chooseAllreduceAlgorithm(pair, 64000, o) == AllreduceAlgorithm::RecursiveDoubling);
  CHECK(chooseAllreduceAlgorithm(pair, 128 << 10, o) == AllreduceAlgorithm::RecursiveDoubling);
  CHECK(chooseAllreduceAlgorithm(pair, 1000000, o) == AllreduceAlgorithm::Rabenseifner);
  // Halfway (log scale) between 1 and 4 MB: ring sqrt(300 * 1000) = 548 against
  // Rabenseifner's sqrt(200 * 1800) = 600.
  CHECK(chooseAllreduceAlgorithm(pair, 2000000, o) == AllreduceAlgorithm::Ring);
  CHECK(chooseAllreduceAlgorithm(pair, 256 << 20, o) == AllreduceAlgorithm::Ring);
  // The same table on a machine whose pipeline wins earlier moves the crossover below 1 MB.
  NetworkModel other = model;
  MeasuredAllreduce fasterRing = tcp;
  fasterRing.seconds["ring"] = {25, 150, 600};
  other.setMeasured(fasterRing);
  REQUIRE(other.measuredAllreduce.size() == 1);
  AllreduceOptions o2 = o;
  o2.model = &other;
  CHECK(chooseAllreduceAlgorithm(pair, 1000000, o2) == AllreduceAlgorithm::Ring);
  // Below the smallest size measured, recursive doubling, whatever won there.
  MeasuredAllreduce startsLate = tcp;
  startsLate.seconds["rabenseifner"] = {5, 200, 1800};
  NetworkModel late = model;
  late.setMeasured(startsLate);
  AllreduceOptions o3 = o;
  o3.model = &late;
  CHECK(chooseAllreduceAlgorithm(pair, 64000, o3) == AllreduceAlgorithm::Rabenseifner);
  CHECK(chooseAllreduceAlgorithm(pair, 16384, o3) == AllreduceAlgorithm::RecursiveDoubling);
  // The file's names are HVD_ALLREDUCE_ALGORITHM's.
  for (auto timed :
       {TimedAlgorithm::RecursiveDoubling, TimedAlgorithm::Ring, TimedAlgorithm::Rabenseifner}) {
    MeasuredAllreduce only{"tcp", 2, {1, 2}, {}};
    only.seconds[timedAlgorithmName(timed)] = {1, 1};
    NetworkModel m;
    m.setMeasured(only);
    CHECK(measuredFastestAllreduce(2, "tcp", 2, 2, m) ==
          parseAllreduceAlgorithm(timedAlgorithmName(timed)));
  }
  // Another link or another number of ranks has no table: the size threshold decides.
  auto shmPair = comm(2, "shm");
  CHECK(chooseAllreduceAlgorithm(*shmPair, 1000000, o) == AllreduceAlgorithm::Ring);
  auto four = comm(4, "tcp");
  CHECK(chooseAllreduceAlgorithm(*four, 1000000, o) == AllreduceAlgorithm::Ring);
}

TEST_CASE("a model's measured tables survive JSON, and a bad one is refused naming its field",
          "[cost_model]") {
  NetworkModel model;
  MeasuredAllreduce t{"shm", 4, {1024, 2048}, {}};
  t.seconds["ring"] = {1e-5, 2e-5};
  t.seconds["recursive_doubling"] = {5e-6, 3e-5};
  model.setMeasured(t);
  NetworkModel back = NetworkModel::fromJson(model.toJson(), "test");
  REQUIRE(back.measured("shm", 4, 4) != nullptr);
  CHECK(back.measured("shm", 4, 4)->seconds == t.seconds);
  CHECK(back.measured("shm", 4, 4)->bytes == t.bytes);
  CHECK(back.measured("shm", 2, 2) == nullptr);
  CHECK(back.measured("shm", 4, 1) == nullptr);
  // A table across hosts keeps its layout; one without ranks_per_host (an older file) is one
  // host's.
  MeasuredAllreduce acrossHosts{"tcp", 8, {4, 65536}, {}, 1};
  acrossHosts.seconds["ring"] = {2e-4, 9e-4};
  model.setMeasured(acrossHosts);
  back = NetworkModel::fromJson(model.toJson(), "test");
  REQUIRE(back.measured("tcp", 8, 1) != nullptr);
  CHECK(back.measured("tcp", 8, 1)->seconds == acrossHosts.seconds);
  CHECK(back.measured("tcp", 8, 8) == nullptr);
  CHECK_THAT(back.describe(), Catch::Contains("allreduce measured over shm on 4 ranks, tcp on 8 "
                                              "ranks (1 per host)"));
  NetworkModel older =
      NetworkModel::fromJson(R"({"measured_allreduce": [{"link": "tcp", "ranks": 2, "bytes": [1], )"
                             R"("seconds": {"ring": [1]}}]})",
                             "old.json");
  CHECK(older.measured("tcp", 2, 2) != nullptr);
  CHECK(older.measured("tcp", 2, 1) == nullptr);
  auto refused = [](const std::string& table) {
    try {
      NetworkModel::fromJson("{\"measured_allreduce\": [" + table + "]}", "m.json");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(
      refused(R"({"link": "tcp", "ranks": 2, "bytes": [2, 1], "seconds": {"ring": [1, 1]}})"),
      Catch::Contains("m.json: measured_allreduce[0]: bytes must be a non-empty ascending"));
  CHECK_THAT(refused(R"({"link": "tcp", "ranks": 2, "bytes": [1, 2], "seconds": {"ring": [1]}})"),
             Catch::Contains("seconds.ring has 1 times for 2 sizes"));
  CHECK_THAT(refused(R"({"link": "tcp", "ranks": 2, "bytes": [1], "seconds": {}, "x": 1})"),
             Catch::Contains("unknown or mistyped field x"));
  CHECK_THAT(refused(R"({"link": "tcp", "ranks": 2, "bytes": [1], "seconds": {"auto": [1]}})"),
             Catch::Contains("m.json: measured_allreduce[0]: measured allreduce over tcp: unknown "
                             "allreduce algorithm 'auto'"));
  CHECK_THAT(refused(R"({"link": "tcp", "ranks": 6, "ranks_per_host": 4, "bytes": [1], )"
                     R"("seconds": {"ring": [1]}})"),
             Catch::Contains("m.json: measured_allreduce[0]: ranks_per_host 4 does not divide "
                             "ranks 6"));
  CHECK_THAT(refused(R"({"link": "tcp", "ranks": 6, "ranks_per_host": 0, "bytes": [1], )"
                     R"("seconds": {"ring": [1]}})"),
             Catch::Contains("ranks_per_host must be >= 1"));
}

TEST_CASE("across hosts, auto picks from the table measured on the job's layout, else the formulas",
          "[cost_model]") {
  // Eight hosts of one rank whose cores other ranks share (calibrate on bench/fake_hosts.py's
  // hosts): a round costs a scheduler's hand-off, so recursive doubling's 3 rounds beat
  // Rabenseifner's 6 well past where the NIC's figures put the crossover.
  MeasuredAllreduce crowded{"tcp", 8, {4, 65536, 1 << 20}, {}, 1};
  crowded.seconds["recursive_doubling"] = {190e-6, 450e-6, 6000e-6};
  crowded.seconds["rabenseifner"] = {380e-6, 600e-6, 4300e-6};
  crowded.seconds["ring"] = {900e-6, 1100e-6, 5000e-6};
  NetworkModel model;  // one rank per host
  AllreduceOptions o;
  o.model = &model;
  auto eight = std::make_unique<Comm>(0, 8, std::vector<std::shared_ptr<Connection>>(8),
                                      std::chrono::milliseconds(1000), nullptr);
  eight->setLinkName("tcp");
  // The formulas, with the built-in NIC: Rabenseifner's at 64 KiB and 1 MiB.
  CHECK(chooseAllreduceAlgorithm(*eight, 65536, o) == AllreduceAlgorithm::Rabenseifner);
  CHECK(chooseAllreduceAlgorithm(*eight, 1 << 20, o) == AllreduceAlgorithm::Rabenseifner);
  model.setMeasured(crowded);
  CHECK(chooseAllreduceAlgorithm(*eight, 4, o) == AllreduceAlgorithm::RecursiveDoubling);
  CHECK(chooseAllreduceAlgorithm(*eight, 65536, o) == AllreduceAlgorithm::RecursiveDoubling);
  CHECK(chooseAllreduceAlgorithm(*eight, 1 << 20, o) == AllreduceAlgorithm::Rabenseifner);
  // Another layout of the same 8 ranks (4 hosts of 2), or 4 of these hosts: the formulas.
  NetworkModel paired = model;
  paired.ranksPerHost = 2;
  AllreduceOptions o2 = o;
  o2.model = &paired;
  CHECK(chooseAllreduceAlgorithm(*eight, 65536, o2) ==
        fastestAllreduce(65536, CommShape{8, 2, 0}, paired));
  auto four = std::make_unique<Comm>(0, 4, std::vector<std::shared_ptr<Connection>>(4),
                                     std::chrono::milliseconds(1000), nullptr);
  four->setLinkName("tcp");
  CHECK(chooseAllreduceAlgorithm(*four, 65536, o) ==
        fastestAllreduce(65536, CommShape{4, 1, 0}, model));
  // A table within one host of 8 ranks is not taken across hosts, nor this one within a host.
  NetworkModel oneHost;
  MeasuredAllreduce local = crowded;
  local.ranksPerHost = 8;
  local.seconds["ring"] = {1e-6, 1e-6, 1e-6};
  oneHost.setMeasured(local);
  AllreduceOptions o3 = o;
  o3.model = &oneHost;
  CHECK(chooseAllreduceAlgorithm(*eight, 4, o3) == AllreduceAlgorithm::RecursiveDoubling);
  oneHost.ranksPerHost = 8;
  CHECK(chooseAllreduceAlgorithm(*eight, 4, o3) == AllreduceAlgorithm::Ring);
  CHECK(model.measured("tcp", 8, 8) == nullptr);
}

TEST_CASE("the staged form's cross-host stage takes no table of one rank per host",
          "[cost_model]") {
  // One rank per host, but the host's 4 ranks cross its NIC at once: not what the table measured.
  NetworkModel perHost;
  MeasuredAllreduce columns{"tcp", 4, {4, 1 << 20}, {}, 1};
  columns.seconds["ring"] = {1e-6, 1e-6};
  columns.seconds["recursive_doubling"] = {2e-6, 2e-6};
  perHost.setMeasured(columns);
  auto cross = std::make_unique<Comm>(0, 4, std::vector<std::shared_ptr<Connection>>(4),
                                      std::chrono::milliseconds(1000), nullptr);
  cross->setLinkName("tcp");
  AllreduceOptions o;
  o.model = &perHost;
  o.ranksPerHost = 1;
  CHECK(chooseAllreduceAlgorithm(*cross, 4, o) == AllreduceAlgorithm::Ring);
  o.nicSharing = 4;
  CHECK(chooseAllreduceAlgorithm(*cross, 4, o) == AllreduceAlgorithm::RecursiveDoubling);
}
