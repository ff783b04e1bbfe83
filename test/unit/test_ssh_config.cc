#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/remote_hosts.h"
#include "launcher/ssh/ssh_config.h"

using namespace hvd::launcher;
using namespace hvd::launcher::ssh;

TEST_CASE("ssh_config: the first value of a keyword wins, Host patterns glob and negate") {
  const std::string text = R"(# global
IdentityFile ~/.ssh/global_key
Host gpu* !gpu-old
    HostName %h.cluster.example
    User=trainer
    Port 2200
    IdentityFile "~/.ssh/gpu key"
Host gpu-old
  User legacy
Host *
  User fallback
  Port 22
  IdentityFile /etc/ssh/shared_key
)";
  auto gpu = lookupSshConfig(text, "cfg", "gpu7", "/home/u");
  CHECK(gpu.hostName == "gpu7.cluster.example");
  CHECK(gpu.user == "trainer");
  CHECK(gpu.port == 2200);
  CHECK(gpu.identityFiles == std::vector<std::string>{"/home/u/.ssh/global_key",
                                                      "/home/u/.ssh/gpu key",
                                                      "/etc/ssh/shared_key"});
  auto old = lookupSshConfig(text, "cfg", "gpu-old", "/home/u");
  CHECK(old.hostName.empty());
  CHECK(old.user == "legacy");
  CHECK(old.port == 22);
  auto other = lookupSshConfig(text, "cfg", "db1", "/home/u");
  CHECK(other.user == "fallback");
}

TEST_CASE("ssh_config: keywords are case-insensitive, Match blocks are skipped") {
  auto c = lookupSshConfig("HOST n1\n  hostname 10.0.0.5\nMatch exec true\n  User nobody\n", "cfg",
                           "n1", "/h");
  CHECK(c.hostName == "10.0.0.5");
  CHECK(c.user.empty());
}

TEST_CASE("ssh_config: a bad Port names the file and line") {
  REQUIRE_THROWS_WITH(lookupSshConfig("Host a\n  Port http\n", "/h/.ssh/config", "a", "/h"),
                      Catch::Contains("/h/.ssh/config:2: Port"));
}

TEST_CASE("ssh_config: host patterns") {
  CHECK(hostPatternMatches("*", "anything"));
  CHECK(hostPatternMatches("node?", "node1"));
  CHECK_FALSE(hostPatternMatches("node?", "node12"));
  CHECK(hostPatternMatches("*.example", "a.b.example"));
  CHECK(hostPatternMatches("NODE*", "node3"));
  CHECK_FALSE(hostPatternMatches("*.example", "example"));
}

TEST_CASE("ssh_config: the system file fills what the user's leaves unset") {
  // As an MPI Operator launcher pod has it: the policy in /etc/ssh/ssh_config, nothing in ~.
  auto user = lookupSshConfig("Host w*\n  User trainer\n  IdentityFile ~/.ssh/mine\n", "user", "w1",
                              "/home/u");
  auto system = lookupSshConfig(
      "Host *\n  User root\n  Port 2222\n  StrictHostKeyChecking no\n"
      "  UserKnownHostsFile /dev/null\n  IdentityFile /etc/ssh/pod_key\n",
      "system", "w1", "/home/u");
  auto merged = mergeSshConfig(user, system);
  CHECK(merged.user == "trainer");  // the user's wins
  CHECK(merged.port == 2222);
  CHECK(merged.strictHostKeyChecking == HostKeyPolicy::Off);
  CHECK(merged.userKnownHostsFiles == std::vector<std::string>{"/dev/null"});
  CHECK_FALSE(merged.globalKnownHostsFiles);
  CHECK(merged.identityFiles == std::vector<std::string>{"/home/u/.ssh/mine", "/etc/ssh/pod_key"});
  auto policyFirst = lookupSshConfig("StrictHostKeyChecking yes\n", "user", "w1", "/home/u");
  CHECK(mergeSshConfig(policyFirst, system).strictHostKeyChecking == HostKeyPolicy::Strict);
}

TEST_CASE("ssh targets: user@host and flags override ~/.ssh/config") {
  Environment env{{"HOME", "/nonexistent-home"}, {"SSH_AUTH_SOCK", "/tmp/agent.sock"}};
  SshOptions o;
  o.port = 2022;
  auto t = sshTargetFor(HostSlots("node1", 2, "alice"), o, env);
  CHECK(t.alias == "node1");
  CHECK(t.address == "node1");
  CHECK(t.port == 2022);
  CHECK(t.user == "alice");
  CHECK(t.userKnownHosts.front() == "/nonexistent-home/.ssh/known_hosts");
  CHECK(t.agentSocket == "/tmp/agent.sock");
  CHECK(t.identityFiles.front() == "/nonexistent-home/.ssh/id_ed25519");
  CHECK(t.hostKeyPolicy == HostKeyPolicy::AcceptNew);
  o.identityFile = "/nonexistent-home/key";
  REQUIRE_THROWS_WITH(sshTargetFor(HostSlots("node1"), o, env),
                      Catch::Contains("--ssh-identity-file /nonexistent-home/key: no such file"));
}

TEST_CASE("network interface flag: one for all, or per host") {
  std::vector<HostSlots> hosts{HostSlots("a", 2), HostSlots("b", 2)};
  auto all = parseNetworkInterfaces("eth1", hosts);
  CHECK(interfaceFor(all, "a") == "eth1");
  CHECK(interfaceFor(all, "b") == "eth1");
  auto per = parseNetworkInterfaces("a=ib0,b=eth2", hosts);
  CHECK(interfaceFor(per, "a") == "ib0");
  CHECK(interfaceFor(per, "b") == "eth2");
  CHECK(interfaceFor(parseNetworkInterfaces("a=ib0", hosts), "b").empty());
  REQUIRE_THROWS_WITH(parseNetworkInterfaces("a=ib0,c=eth0", hosts),
                      Catch::Contains("host 'c' is not one of the job's hosts"));
  REQUIRE_THROWS_WITH(parseNetworkInterfaces("a=ib0,a=eth0", hosts),
                      Catch::Contains("host 'a' is given twice"));
  REQUIRE_THROWS_WITH(parseNetworkInterfaces("a=", hosts),
                      Catch::Contains("'a=' is not host=IFACE"));
  REQUIRE_THROWS_WITH(parseNetworkInterfaces("eth0,eth1", hosts),
                      Catch::Contains("one interface for every host"));
}
