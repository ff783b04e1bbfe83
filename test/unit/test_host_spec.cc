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
  fails("a", "no slot count");
  fails(":3", "no host name");
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
