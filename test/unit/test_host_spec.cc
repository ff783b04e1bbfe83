#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/host_spec.h"

using namespace hvd::launcher;

TEST_CASE("host lists parse into hosts and slots in order") {
  auto hosts = parseHostList("a:2,b:1,localhost:4");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].host == "a");
  CHECK(hosts[0].slots == 2);
  CHECK(hosts[2].host == "localhost");
  CHECK(hosts[2].slots == 4);
  CHECK(describeHosts(hosts) == "a:2,b:1,localhost:4");
}

TEST_CASE("malformed host entries are rejected with the entry named") {
  auto fails = [](const std::string& spec, const std::string& fragment) {
    INFO(spec);
    REQUIRE_THROWS_WITH(parseHostList(spec), Catch::Contains(fragment));
    REQUIRE_THROWS_AS(parseHostList(spec), hvd::InvalidArgument);
  };
  fails("a:0", "out of range");
  fails("a:two", "not an integer");
  fails("a:1:2", "more than one ':'");
  fails("a:1,,b:1", "entry 2 is empty");
  fails("", "entry 1 is empty");
  fails("a:1,", "entry 2 is empty");
  fails("a:", "empty slot count");
  fails("@a:1", "empty user");
  fails("[::1:2", "without closing");
  fails("[::1]x", "after ']'");
  fails("::1:2", "more than one ':'");
  fails(":3", "no host name");
  // Found by test/fuzz/host_spec_fuzzer.cc: "[[]" was host "[", which describeHosts printed as
  // "[:1", a spec that does not parse.
  fails("[[]", "'[' or ']' inside the host name");
  fails("a]b:1", "'[' or ']' inside the host name");
  fails("[a[b]:2", "'[' or ']' inside the host name");
  fails("a:1,a:2", "listed twice");
  fails("a:-1", "out of range");
  fails("a:1x", "not an integer");
}

TEST_CASE("a host spec in the command position is recognised") {
  CHECK(looksLikeHostSlots("b:1"));
  CHECK(looksLikeHostSlots("node-2.example:4,node-3:4"));
  CHECK_FALSE(looksLikeHostSlots("python"));
  CHECK_FALSE(looksLikeHostSlots("./train.py"));
  CHECK_FALSE(looksLikeHostSlots("http://x:80"));
}

TEST_CASE("host entries take a user, IPv6 literals, and an optional slot count") {
  auto hosts = parseHostList("alice@node1:4,[::1]:2,10.0.0.7,[fe80::1]");
  REQUIRE(hosts.size() == 4);
  CHECK((hosts[0].user == "alice" && hosts[0].host == "node1" && hosts[0].slots == 4));
  CHECK((hosts[1].host == "::1" && hosts[1].slots == 2 && hosts[1].user.empty()));
  CHECK((hosts[2].host == "10.0.0.7" && hosts[2].slots == 1));
  CHECK((hosts[3].host == "fe80::1" && hosts[3].slots == 1));
  CHECK(describeHosts(hosts) == "alice@node1:4,[::1]:2,10.0.0.7:1,[fe80::1]:1");
}
