#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/rendezvous_bind.h"

using namespace hvd::launcher;

TEST_CASE("a job on this machine alone binds loopback whatever interface was chosen") {
  CHECK(rendezvousBindAddress({}) == "127.0.0.1");
  CHECK(rendezvousBindAddress({false, "localhost", "no-such-iface0", {}}) == "127.0.0.1");
}

TEST_CASE("a chosen interface decides the address when other hosts may take part") {
  CHECK(rendezvousBindAddress({true, "", "lo", {{"a", "10.0.0.5"}}}) == "127.0.0.1");
  REQUIRE_THROWS_WITH(rendezvousBindAddress({true, "node1", "no-such-iface0", {}}),
                      Catch::Contains("host node1: network interface 'no-such-iface0'"));
  REQUIRE_THROWS_WITH(rendezvousBindAddress({true, "", "no-such-iface0", {}}),
                      Catch::Contains("host (hvdrun's)"));
}

TEST_CASE("hosts known up front bind the address that reaches the first of them") {
  CHECK(rendezvousBindAddress({true, "", "", {{"a", "10.0.0.5"}, {"b", "10.0.0.5"}}}) ==
        "10.0.0.5");
  // Another route only warns: every rank is told the one address.
  CHECK(rendezvousBindAddress({true, "", "", {{"a", "10.0.0.5"}, {"b", "192.168.1.2"}}}) ==
        "10.0.0.5");
  REQUIRE_THROWS_AS(rendezvousBindAddress({true, "", "", {{"a", "127.0.1.1"}}}),
                    hvd::InvalidArgument);
  REQUIRE_THROWS_WITH(rendezvousBindAddress({true, "", "", {{"a", "127.0.1.1"}}}),
                      Catch::Contains("cannot use the loopback address 127.0.1.1"));
}

TEST_CASE("hosts that join later start on loopback (each is served with listenAlso)") {
  CHECK(rendezvousBindAddress({true, "localhost", "", {}}) == "127.0.0.1");
}
