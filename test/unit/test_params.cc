#include <catch2/catch.hpp>

#include "common/error.h"
#include "common/params.h"
#include "runtime/config.h"
#include "runtime/link_waits.h"

using namespace hvd::params;
using hvd::runtime::Config;

TEST_CASE("parameters take their declared defaults") {
  auto v = ParamValues::fromMap({});
  CHECK(v.getInt("HVD_SIZE") == 1);
  CHECK(v.getInt("HVD_START_TIMEOUT") == 30);
  CHECK(v.getString("HVD_LOG_LEVEL") == "warn");
  CHECK_FALSE(v.isSet("HVD_SIZE"));
}

TEST_CASE("environment values override defaults, and HOROVOD_ names are accepted") {
  auto v = ParamValues::fromMap({{"HVD_RANK", "3"},
                                 {"HVD_SIZE", "4"},
                                 {"HOROVOD_LOCAL_RANK", "1"},
                                 {"HOROVOD_LOCAL_SIZE", "2"}});
  CHECK(v.getInt("HVD_RANK") == 3);
  CHECK(v.getInt("HVD_LOCAL_RANK") == 1);
  CHECK(v.isSet("HVD_RANK"));
  CHECK(v.source("HVD_LOCAL_RANK") == Source::Environment);
}

TEST_CASE("malformed values are rejected naming the variable") {
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HVD_SIZE", "four"}}),
                      Catch::Contains("HVD_SIZE='four': not an integer"));
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HVD_SIZE", "4x"}}), Catch::Contains("HVD_SIZE"));
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HVD_SIZE", "0"}}), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HOROVOD_RANK", "-1"}}),
                      Catch::Contains("HOROVOD_RANK"));
}

TEST_CASE("runtime config rejects inconsistent placement and missing launcher settings") {
  REQUIRE_THROWS_WITH(
      Config::fromParams(ParamValues::fromMap({{"HVD_RANK", "4"}, {"HVD_SIZE", "4"}})),
      Catch::Contains("HVD_RANK=4 must be below HVD_SIZE=4"));
  REQUIRE_THROWS_WITH(Config::fromParams(ParamValues::fromMap({{"HVD_SIZE", "2"}})),
                      Catch::Contains("HVD_RENDEZVOUS_ADDR is not set"));
  REQUIRE_THROWS_WITH(Config::fromParams(ParamValues::fromMap({{"HVD_SIZE", "2"},
                                                               {"HVD_RENDEZVOUS_ADDR", "127.0.0.1"},
                                                               {"HVD_RENDEZVOUS_PORT", "5000"}})),
                      Catch::Contains("HVD_SECRET is not set"));
  auto single = Config::fromParams(ParamValues::fromMap({}));
  CHECK(single.topology.size == 1);
  CHECK(single.rendezvousAddr.empty());
}

TEST_CASE("the secret parameter is marked so that nothing prints it") {
  CHECK(spec("HVD_SECRET").secret);
  for (const auto& p : allParams()) {
    INFO(p.name);
    CHECK(p.name.rfind("HVD_", 0) == 0);
    CHECK_FALSE(p.description.empty());
  }
}

TEST_CASE(
    "a silent rank is named after 60 s by default, after HVD_LIVENESS_TIMEOUT_SECONDS if set") {
  // The end-to-end test of a stopped rank sets a short timeout (test_hvdrun_failures.py); the
  // production default is checked here, where it costs nothing to check.
  CHECK(Config::fromParams(ParamValues::fromMap({})).engine.livenessTimeout ==
        std::chrono::seconds(60));
  auto set = Config::fromParams(ParamValues::fromMap({{"HVD_LIVENESS_TIMEOUT_SECONDS", "5"}}));
  CHECK(set.engine.livenessTimeout == std::chrono::seconds(5));
  CHECK(Config::fromParams(ParamValues::fromMap({{"HVD_LIVENESS_TIMEOUT_SECONDS", "0"}}))
            .engine.livenessTimeout == std::chrono::seconds(0));
}

TEST_CASE("HVD_CHECK_REPLICAS: off, first and every:N; anything else named with what it takes") {
  auto every = [](const std::string& text) {
    return Config::fromParams(ParamValues::fromMap({{"HVD_CHECK_REPLICAS", text}}))
        .checkReplicasEvery;
  };
  CHECK(Config::fromParams(ParamValues::fromMap({})).checkReplicasEvery == 0);  // first
  CHECK(every("off") == -1);
  CHECK(every("first") == 0);
  CHECK(every("every:2") == 2);
  for (const char* bad : {"sometimes", "every:0", "every:x", "every:2x", "every:", "First"})
    REQUIRE_THROWS_WITH(every(bad), Catch::Contains(std::string("HVD_CHECK_REPLICAS='") + bad +
                                                    "': expected off, first or every:N"));
}

TEST_CASE("the engine's and the direct collectives' polling times come from their variables") {
  auto defaults = Config::fromParams(ParamValues::fromMap({}));
  CHECK(defaults.engine.spinTime == std::chrono::microseconds(30));
  CHECK(defaults.directSpinTime == std::chrono::microseconds(2000));
  auto set = Config::fromParams(ParamValues::fromMap(
      {{"HVD_SPIN_MICROSECONDS", "0"}, {"HVD_DIRECT_SPIN_MICROSECONDS", "150"}}));
  CHECK(set.engine.spinTime == std::chrono::microseconds(0));
  CHECK(set.directSpinTime == std::chrono::microseconds(150));
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HVD_DIRECT_SPIN_MICROSECONDS", "-5"}}),
                      Catch::Contains("HVD_DIRECT_SPIN_MICROSECONDS"));
}

TEST_CASE(
    "collectives called directly poll like the engine's where a host's ranks outnumber its CPUs") {
  using std::chrono::microseconds;
  auto config = Config::fromParams(ParamValues::fromMap({}));
  // A CPU per rank: every message polls for HVD_DIRECT_SPIN_MICROSECONDS.
  for (auto [ranks, cpus] : {std::pair{2, 2}, {1, 2}, {8, 16}, {4, 0}}) {
    auto spins = directCollectiveSpins(config, ranks, cpus);
    CHECK(spins.smallSpin == microseconds(2000));
    CHECK(spins.largeSpin == microseconds(2000));
  }
  // More ranks than CPUs: small messages for HVD_SPIN_MICROSECONDS, large ones sleep at once.
  for (auto [ranks, cpus] : {std::pair{3, 2}, {16, 2}, {17, 16}}) {
    auto spins = directCollectiveSpins(config, ranks, cpus);
    CHECK(spins.smallSpin == microseconds(30));
    CHECK(spins.largeSpin == microseconds(0));
    CHECK(spins.spinFor(true) == microseconds(30));
    CHECK(spins.spinFor(false) == microseconds(0));
  }
  // Neither polls longer than HVD_DIRECT_SPIN_MICROSECONDS says.
  auto shorter = Config::fromParams(ParamValues::fromMap(
      {{"HVD_SPIN_MICROSECONDS", "500"}, {"HVD_DIRECT_SPIN_MICROSECONDS", "10"}}));
  CHECK(directCollectiveSpins(shorter, 16, 2).smallSpin == microseconds(10));
  CHECK(directCollectiveSpins(shorter, 2, 2).largeSpin == microseconds(10));
}

TEST_CASE("the engine's data links poll small messages, and large ones while a caller waits") {
  using std::chrono::microseconds;
  using std::chrono::seconds;
  auto config = Config::fromParams(ParamValues::fromMap({{"HVD_STALL_CHECK_TIME_SECONDS", "7"},
                                                         {"HVD_STALL_SHUTDOWN_TIME_SECONDS", "20"},
                                                         {"HVD_LIVENESS_TIMEOUT_SECONDS", "9"}}));
  auto blocked = std::make_shared<std::atomic<int>>(0);
  auto engine = dataLinkWaits(config, {1, 2}, blocked, nullptr);
  CHECK(engine.mode == hvd::collectives::WaitMode::Blocking);
  CHECK(engine.spins.smallSpin == microseconds(30));
  CHECK(engine.spins.blockedCallers == blocked);
  CHECK(engine.spins.spinFor(false) == microseconds(0));  // nobody waits on a result
  *blocked = 1;
  CHECK(engine.spins.spinFor(false) > microseconds(0));
  CHECK(engine.spins.stall.warnAfter == seconds(7));  // a transfer that stops is a stall
  CHECK(engine.spins.stall.failAfter == seconds(20));
  CHECK(engine.spins.stall.stoppedPeerAfter == seconds(9));
  // Called directly: no blocked-callers count, the direct spins, no stall report, but a
  // stopped peer still fails at the liveness timeout.
  auto direct = dataLinkWaits(config, {1, 2}, nullptr, nullptr);
  CHECK(direct.spins.blockedCallers == nullptr);
  CHECK(direct.spins.largeSpin == microseconds(2000));
  CHECK(direct.spins.stall.failAfter == seconds(0));
  CHECK(direct.spins.stall.stoppedPeerAfter == seconds(9));
  // Eight ranks of other host names on this kernel's 2 CPUs wait as a crowded host's do.
  auto crowded = dataLinkWaits(config, {8, 2, true}, nullptr, nullptr);
  CHECK(crowded.spins.smallSpin == microseconds(30));
  CHECK(crowded.spins.largeSpin == microseconds(0));
  auto noStallCheck = Config::fromParams(ParamValues::fromMap({{"HVD_STALL_CHECK_DISABLE", "1"}}));
  CHECK(dataLinkWaits(noStallCheck, {1, 2}, blocked, nullptr).spins.stall.failAfter == seconds(0));
}

TEST_CASE("HVD_SEGMENT_BYTES is 0 (each transport's own) or at least 1024") {
  CHECK(Config::fromParams(ParamValues::fromMap({})).engine.executor.segmentBytes == 0);
  CHECK(Config::fromParams(ParamValues::fromMap({{"HVD_SEGMENT_BYTES", "1024"}}))
            .engine.executor.segmentBytes == 1024);
  REQUIRE_THROWS_WITH(
      Config::fromParams(ParamValues::fromMap({{"HVD_SEGMENT_BYTES", "512"}})),
      Catch::Contains("HVD_SEGMENT_BYTES=512: expected 0 (the transport's) or at least 1024"));
}

TEST_CASE("allreduce algorithm names parse back, and an unknown one names the valid ones") {
  using hvd::collectives::AllreduceAlgorithm;
  for (auto a : {AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring,
                 AllreduceAlgorithm::RecursiveDoubling, AllreduceAlgorithm::Rabenseifner})
    CHECK(hvd::collectives::parseAllreduceAlgorithm(hvd::collectives::allreduceAlgorithmName(a)) ==
          a);
  CHECK(hvd::collectives::parseAllreduceAlgorithm("rabenseifner") ==
        AllreduceAlgorithm::Rabenseifner);
  REQUIRE_THROWS_AS(hvd::collectives::parseAllreduceAlgorithm("Ring"), hvd::InvalidArgument);
  REQUIRE_THROWS_WITH(hvd::collectives::parseAllreduceAlgorithm("tree"),
                      "unknown allreduce algorithm 'tree' (use one of auto, ring, "
                      "recursive_doubling, rabenseifner)");
  // The registry's choices and the parser's names are the same list.
  CHECK(spec("HVD_ALLREDUCE_ALGORITHM").choices ==
        std::vector<std::string>{"auto", "ring", "recursive_doubling", "rabenseifner"});
  for (const auto& name : spec("HVD_ALLREDUCE_ALGORITHM").choices)
    CHECK(hvd::collectives::allreduceAlgorithmName(
              hvd::collectives::parseAllreduceAlgorithm(name)) == name);
}

TEST_CASE("HVD_ALLREDUCE_ALGORITHM forces the algorithm, a bad value fails naming it") {
  using hvd::collectives::AllreduceAlgorithm;
  CHECK(Config::fromParams(ParamValues::fromMap({})).engine.executor.allreduceAlgorithm ==
        AllreduceAlgorithm::Auto);
  CHECK(Config::fromParams(ParamValues::fromMap({{"HVD_ALLREDUCE_ALGORITHM", "rabenseifner"}}))
            .engine.executor.allreduceAlgorithm == AllreduceAlgorithm::Rabenseifner);
  CHECK(
      Config::fromParams(ParamValues::fromMap({{"HVD_ALLREDUCE_ALGORITHM", "recursive_doubling"}}))
          .engine.executor.allreduceAlgorithm == AllreduceAlgorithm::RecursiveDoubling);
  REQUIRE_THROWS_AS(ParamValues::fromMap({{"HVD_ALLREDUCE_ALGORITHM", "bogus"}}),
                    hvd::InvalidArgument);
  REQUIRE_THROWS_WITH(ParamValues::fromMap({{"HVD_ALLREDUCE_ALGORITHM", "bogus"}}),
                      "HVD_ALLREDUCE_ALGORITHM='bogus': expected one of auto, ring, "
                      "recursive_doubling, rabenseifner");
}
