#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/launch_agent.h"
#include "launcher/worker_env.h"

using namespace hvd::launcher;

TEST_CASE("workers get their placement under HVD_, HOROVOD_ and torchrun names") {
  RankPlacement p{3, 4, 1, 2, 1, 2, "hostB"};
  JobIdentity job{"127.0.0.1", 4242, "s3cr3t", "job1"};
  auto env = workerEnvironment({{"PATH", "/bin"}, {"KEEP", "1"}}, p, job, {"FOO=bar"},
                               {{"HVD_START_TIMEOUT", "7"}});
  CHECK(env["HVD_RANK"] == "3");
  CHECK(env["HVD_SIZE"] == "4");
  CHECK(env["HVD_LOCAL_RANK"] == "1");
  CHECK(env["HVD_LOCAL_SIZE"] == "2");
  CHECK(env["HVD_CROSS_RANK"] == "1");
  CHECK(env["HVD_CROSS_SIZE"] == "2");
  CHECK(env["HVD_HOSTNAME"] == "hostB");
  CHECK(env["HOROVOD_RANK"] == "3");
  CHECK(env["HOROVOD_LOCAL_SIZE"] == "2");
  CHECK(env["RANK"] == "3");
  CHECK(env["WORLD_SIZE"] == "4");
  CHECK(env["LOCAL_RANK"] == "1");
  CHECK(env["LOCAL_WORLD_SIZE"] == "2");
  CHECK(env["HVD_RENDEZVOUS_ADDR"] == "127.0.0.1");
  CHECK(env["HVD_RENDEZVOUS_PORT"] == "4242");
  CHECK(env["HVD_SECRET"] == "s3cr3t");
  CHECK(env["HVD_START_TIMEOUT"] == "7");
  CHECK(env["FOO"] == "bar");
  CHECK(env["KEEP"] == "1");
}

TEST_CASE("exporting VAR copies the launcher's value and rejects unset or invalid names") {
  RankPlacement p;
  JobIdentity job{"127.0.0.1", 1, "s", "j"};
  auto env = workerEnvironment({{"MYVAR", "hello"}}, p, job, {"MYVAR"}, {});
  CHECK(env["MYVAR"] == "hello");
  REQUIRE_THROWS_WITH(workerEnvironment({}, p, job, {"NOPE"}, {}),
                      Catch::Contains("-x NOPE: NOPE is not set"));
  REQUIRE_THROWS_AS(workerEnvironment({}, p, job, {"1BAD=x"}, {}), hvd::InvalidArgument);
}

TEST_CASE("exporting a variable hvdrun sets for each rank is refused, naming it") {
  RankPlacement p;
  p.rank = 3;
  JobIdentity job{"127.0.0.1", 1, "s", "j"};
  for (const char* x : {"HVD_RANK=5", "LOCAL_RANK=1", "HVD_SECRET=x", "WORLD_SIZE"})
    REQUIRE_THROWS_WITH(workerEnvironment({{"WORLD_SIZE", "9"}}, p, job, {x}, {}),
                        Catch::Contains(std::string("-x ") + x + ": hvdrun sets"));
  // The same names inherited from hvdrun's own environment are replaced, not refused.
  auto env = workerEnvironment({{"HVD_RANK", "7"}, {"RANK", "7"}}, p, job, {}, {});
  CHECK(env["HVD_RANK"] == "3");
  CHECK(env["RANK"] == "3");
}

TEST_CASE("a launch agent runs as AGENT HOST COMMAND with the worker's environment and names") {
  RankPlacement p{1, 2, 1, 2, 0, 1, "10.0.0.7"};
  JobIdentity job{"10.0.0.1", 4242, "s3cr3t", "job1"};
  auto env = workerEnvironment({{"PATH", "/bin"}, {"HOME", "/root"}}, p, job, {}, {});
  WorkerSpec w = agentWorker("/opt/agent", p, env, {"python", "train.py"});
  CHECK(w.executable == "/opt/agent");
  CHECK(w.argv == std::vector<std::string>{"/opt/agent", "10.0.0.7", "python", "train.py"});
  CHECK(w.env.at("HVD_SECRET") == "s3cr3t");  // in its environment, never on a command line
  std::string names = "," + w.env.at("HVD_LAUNCH_AGENT_ENV") + ",";
  CHECK(names.find(",HVD_RANK,") != std::string::npos);
  CHECK(names.find(",HVD_SECRET,") != std::string::npos);
  CHECK(names.find(",PATH,") != std::string::npos);
  CHECK(names.find(",HOME,") == std::string::npos);  // the host's own, as over SSH
}

TEST_CASE("a launch agent that is not there is refused naming the flag or the variable") {
  LaunchOptions o;
  CHECK(resolveLaunchAgent(o, {}).empty());
  o.launchAgent = "/nonexistent/agent";
  REQUIRE_THROWS_WITH(resolveLaunchAgent(o, {}),
                      Catch::Contains("--launch-agent: /nonexistent/agent: not found"));
  o.launchAgent.clear();
  REQUIRE_THROWS_WITH(
      resolveLaunchAgent(o, {{"HVD_LAUNCH_AGENT", "no-such-agent"}, {"PATH", "/x"}}),
      Catch::Contains("HVD_LAUNCH_AGENT: no-such-agent: command not found"));
  CHECK(resolveLaunchAgent(o, {{"HVD_LAUNCH_AGENT", "sh"}, {"PATH", "/bin"}}) == "/bin/sh");
}
