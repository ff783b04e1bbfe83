#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include "common/error.h"

#include "launcher/host_plan.h"
#include "launcher/hostfile.h"
#include "launcher/slurm.h"

using namespace hvd::launcher;

TEST_CASE("hostfiles parse hosts, slots, comments and blank lines") {
  auto hosts = parseHostfile(
      "# cluster\nnode1 slots=4\n\n  node2 slots=2 max_slots=8 # gpu\nnode3\n", "hosts.txt");
  REQUIRE(hosts.size() == 3);
  CHECK((hosts[0].host == "node1" && hosts[0].slots == 4));
  CHECK((hosts[1].host == "node2" && hosts[1].slots == 2));
  CHECK((hosts[2].host == "node3" && hosts[2].slots == 1));
}

TEST_CASE("hostfile errors name the file, the line and the token") {
  REQUIRE_THROWS_WITH(parseHostfile("a slots=2\nb slots=x\n", "h.txt"),
                      Catch::Contains("h.txt:2") && Catch::Contains("'slots=x'"));
  REQUIRE_THROWS_WITH(parseHostfile("a slot=2\n", "h.txt"),
                      Catch::Contains("h.txt:1") && Catch::Contains("unexpected token 'slot=2'"));
  REQUIRE_THROWS_WITH(parseHostfile("a\na slots=3\n", "h.txt"),
                      Catch::Contains("h.txt:2") && Catch::Contains("listed twice"));
  REQUIRE_THROWS_WITH(parseHostfile("# nothing\n\n", "h.txt"), Catch::Contains("lists no hosts"));
  REQUIRE_THROWS_WITH(parseHostfile("a slots=2 slots=3\n", "h.txt"),
                      Catch::Contains("h.txt:1: 'slots=3': slots given twice for host 'a'"));
  REQUIRE_THROWS_WITH(parseHostfile("a slots=0\n", "h.txt"), Catch::Contains("out of range"));
  REQUIRE_THROWS_AS(loadHostfile("/nonexistent/hvd-hostfile"), hvd::InvalidArgument);
}

TEST_CASE("Slurm node lists expand ranges, keep zero padding and mix plain names") {
  CHECK(expandNodeList("node[01-04,07]") ==
        std::vector<std::string>{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expandNodeList("gpu5,cpu[8-10],login") ==
        std::vector<std::string>{"gpu5", "cpu8", "cpu9", "cpu10", "login"});
  CHECK(expandNodeList("n[098-101]") == std::vector<std::string>{"n098", "n099", "n100", "n101"});
  CHECK(expandNodeList("single") == std::vector<std::string>{"single"});
  REQUIRE_THROWS_WITH(expandNodeList("node[01-04"), Catch::Contains("unbalanced '['"));
  REQUIRE_THROWS_WITH(expandNodeList("node[04-01]"), Catch::Contains("range '04-01'"));
  REQUIRE_THROWS_WITH(expandNodeList("a,,b"), Catch::Contains("empty host name"));
}

TEST_CASE("Slurm tasks per node expand repeat counts and must match the nodes") {
  CHECK(expandTasksPerNode("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(expandTasksPerNode("4") == std::vector<int>{4});
  REQUIRE_THROWS_WITH(expandTasksPerNode("2(x3"), Catch::Contains("lacks ')'"));
  REQUIRE_THROWS_AS(expandTasksPerNode("two"), hvd::InvalidArgument);
  auto hosts = slurmHosts("node[1-3],big", "2(x3),8");
  REQUIRE(hosts.size() == 4);
  CHECK((hosts[3].host == "big" && hosts[3].slots == 8));
  REQUIRE_THROWS_WITH(slurmHosts("node[1-3]", "2"),
                      Catch::Contains("names 3 nodes") && Catch::Contains("gives 1 counts"));
}

TEST_CASE("hosts come from -H, --hostfile, Slurm, Open MPI's default hostfile, or this machine") {
  LaunchOptions o;
  // Per process: the sanitizer builds run these tests at the same time.
  auto path = std::filesystem::temp_directory_path() /
              ("hvd-test-default-hostfile-" + std::to_string(::getpid()));
  std::ofstream(path) << "pod-0.job.ns.svc slots=2\npod-1.job.ns.svc slots=2\n";
  Environment env{{"OMPI_MCA_orte_default_hostfile", path.string()}};
  // A Kubernetes MPI Operator launcher pod: bare hvdrun takes the operator's hostfile, and
  // -np every slot in it.
  HostPlan pod = planHosts(o, env);
  REQUIRE(pod.hosts.size() == 2);
  CHECK(pod.hosts[1].host == "pod-1.job.ns.svc");
  CHECK(pod.source == "OMPI_MCA_orte_default_hostfile=" + path.string());
  CHECK(rankCount(o, pod) == 4);
  // Slurm's allocation comes first; -H and --hostfile before both.
  env["SLURM_JOB_NODELIST"] = "n[1-3]";
  env["SLURM_TASKS_PER_NODE"] = "2(x3)";
  CHECK(rankCount(o, planHosts(o, env)) == 6);
  o.hosts = "a:1,b:2";
  CHECK(rankCount(o, planHosts(o, env)) == 3);
  o.np = 2;
  CHECK(rankCount(o, planHosts(o, env)) == 2);
  // Nothing given anywhere: this machine, and -np is required.
  LaunchOptions bare;
  HostPlan local = planHosts(bare, {});
  CHECK(local.defaulted);
  REQUIRE_THROWS_WITH(rankCount(bare, local), Catch::Contains("-np/--num-proc is required"));
  std::filesystem::remove(path);
}
