#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "launcher/elastic_membership.h"
#include "launcher/host_discovery.h"

using namespace hvd::launcher;

namespace {
std::vector<ElasticWorker> workers(std::vector<std::tuple<int, const char*, int>> list) {
  std::vector<ElasticWorker> out;
  for (auto& [id, host, slot] : list) out.push_back({id, {host, slot}});
  return out;
}
}  // namespace

TEST_CASE("the first round fills the offered slots in host order up to --max-np") {
  auto change = planMembership({}, {{"a", 2}, {"b", 2}}, 3);
  REQUIRE(change.add.size() == 3);
  CHECK(change.add[0] == ElasticSlot{"a", 0});
  CHECK(change.add[1] == ElasticSlot{"a", 1});
  CHECK(change.add[2] == ElasticSlot{"b", 0});
  CHECK(change.keep.empty());
  CHECK(planMembership({}, {{"a", 2}, {"b", 2}}, -1).size() == 4);
}

TEST_CASE("a round keeps every worker whose slot is still offered and adds the new slots") {
  auto current = workers({{0, "a", 0}, {1, "a", 1}, {2, "b", 0}});
  SECTION("no change") {
    auto change = planMembership(current, {{"a", 2}, {"b", 1}}, -1);
    CHECK_FALSE(change.changed());
    CHECK(change.keep.size() == 3);
  }
  SECTION("a host appears") {
    auto change = planMembership(current, {{"a", 2}, {"b", 1}, {"c", 2}}, -1);
    CHECK(change.keep.size() == 3);
    REQUIRE(change.add.size() == 2);
    CHECK(change.add[0] == ElasticSlot{"c", 0});
  }
  SECTION("a host disappears, another shrinks") {
    auto change = planMembership(current, {{"a", 1}}, -1);
    REQUIRE(change.keep.size() == 1);
    CHECK(change.keep[0].id == 0);
    REQUIRE(change.remove.size() == 2);
    CHECK(change.remove[0].id == 1);
    CHECK(change.remove[1].id == 2);
  }
  SECTION("--max-np keeps old workers before it adds new ones") {
    auto change = planMembership(current, {{"c", 4}, {"a", 2}, {"b", 1}}, 4);
    CHECK(change.keep.size() == 3);
    REQUIRE(change.add.size() == 1);
    CHECK(change.add[0] == ElasticSlot{"c", 0});
  }
}

TEST_CASE("ranks go to the oldest workers first, each host's workers together") {
  // Worker 0 is the oldest: its host comes first, and on a host the older worker first,
  // whatever the slots (7 replaced a worker of slot 0 that failed).
  auto members = workers({{5, "b", 0}, {0, "a", 1}, {7, "a", 0}, {3, "c", 0}});
  auto placed = placeMembers(members);
  REQUIRE(placed.size() == 4);
  CHECK(placed.at(0).rank == 0);
  CHECK(placed.at(7).rank == 1);
  CHECK(placed.at(3).rank == 2);
  CHECK(placed.at(5).rank == 3);
  CHECK(placed.at(7).localRank == 1);
  CHECK(placed.at(7).localSize == 2);
  CHECK(placed.at(3).crossRank == 1);
  CHECK(placed.at(5).crossSize == 3);
  CHECK(placed.at(3).size == 4);
  // A host that came back with only new workers does not take rank 0 from a survivor.
  placed = placeMembers(workers({{9, "a", 0}, {10, "a", 1}, {4, "b", 0}}));
  CHECK(placed.at(4).rank == 0);
  CHECK(placed.at(9).rank == 1);
  CHECK(placeMembers({}).empty());
}

TEST_CASE("discovery output: host or host:slots per line, comments and blanks skipped") {
  auto hosts =
      parseDiscoveredHosts("# hosts\nnode1:4\n\n  node2  \n[::1]:2\nuser@node3:1\n", 3, "hosts.sh");
  REQUIRE(hosts.size() == 4);
  CHECK(hosts[0].host == "node1");
  CHECK(hosts[0].slots == 4);
  CHECK(hosts[1].host == "node2");
  CHECK(hosts[1].slots == 3);  // --slots-per-host
  CHECK(hosts[2].host == "::1");
  CHECK(hosts[2].slots == 2);
  CHECK(hosts[3].user == "user");
  CHECK(parseDiscoveredHosts("", 1, "x").empty());
}

TEST_CASE("discovery output errors name the script, the line and the entry") {
  CHECK_THROWS_WITH(parseDiscoveredHosts("a:1\nb:x\n", 1, "hosts.sh"),
                    Catch::Contains("hosts.sh: line 2 'b:x'"));
  CHECK_THROWS_WITH(parseDiscoveredHosts("a:1,b:1\n", 1, "hosts.sh"),
                    Catch::Contains("one host per line"));
  CHECK_THROWS_WITH(parseDiscoveredHosts("a:1\na:2\n", 1, "hosts.sh"),
                    Catch::Contains("host a listed twice"));
  CHECK_THROWS_WITH(parseDiscoveredHosts("a:0\n", 1, "hosts.sh"), Catch::Contains("line 1"));
}

TEST_CASE("the discovery script runs as a program, with its failures named") {
  auto dir =
      std::filesystem::temp_directory_path() / ("hvd-discovery-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto script = [&](const std::string& name, const std::string& body) {
    std::string path = (dir / name).string();
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  };
  hvd::launcher::Environment env{{"PATH", "/usr/bin:/bin"}};
  auto hosts =
      runDiscoveryScript(script("good.sh", "echo a:2\necho b\n"), 3, env, std::chrono::seconds(5));
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[1].host == "b");
  CHECK(hosts[1].slots == 3);
  CHECK_THROWS_WITH(runDiscoveryScript(script("bad.sh", "echo no cluster >&2\nexit 4\n"), 1, env,
                                       std::chrono::seconds(5)),
                    Catch::Contains("bad.sh exited with code 4: no cluster"));
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(
      runDiscoveryScript(script("slow.sh", "sleep 30\n"), 1, env, std::chrono::seconds(1)),
      Catch::Contains("slow.sh ran longer than 1 s and was killed"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  std::filesystem::remove_all(dir);
}
