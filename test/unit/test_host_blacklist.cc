#include <catch2/catch.hpp>

#include "launcher/host_blacklist.h"

using namespace hvd::launcher;
using namespace std::chrono_literals;
using Clock = HostBlacklist::Clock;

TEST_CASE("without a cooldown a failed host stays out for good") {
  HostBlacklist b;
  auto t0 = Clock::now();
  CHECK_FALSE(b.blocked("a", t0));
  CHECK_FALSE(b.add("a", t0).has_value());
  CHECK(b.blocked("a", t0 + 100000s));
  CHECK_FALSE(b.blocked("b", t0));
  CHECK(b.takeReturned(t0 + 100000s).empty());
  CHECK(b.describe(t0) == "a");
  CHECK_FALSE(b.coolsDown());
}

TEST_CASE("a cooldown doubles with each failure of the host, up to its maximum") {
  HostBlacklist b(CooldownRange{10s, 35s});
  auto t0 = Clock::now();
  CHECK(b.add("a", t0) == 10s);
  CHECK(b.blocked("a", t0 + 9s));
  CHECK(b.describe(t0 + 9s) == "a");
  CHECK(b.takeReturned(t0 + 9s).empty());
  CHECK_FALSE(b.blocked("a", t0 + 10s));
  CHECK(b.describe(t0 + 10s).empty());
  CHECK(b.takeReturned(t0 + 10s) == std::vector<std::string>{"a"});
  CHECK(b.takeReturned(t0 + 11s).empty());  // reported once
  auto t1 = t0 + 60s;
  CHECK(b.add("a", t1) == 20s);
  CHECK(b.blocked("a", t1 + 19s));
  CHECK_FALSE(b.blocked("a", t1 + 20s));
  CHECK(b.add("a", t1 + 20s) == 35s);  // 40 s, capped
  CHECK(b.add("a", t1 + 20s) == 35s);
  for (int i = 0; i < 100; ++i) b.add("a", t1);  // no overflow however often it fails
  CHECK(b.add("a", t1) == 35s);
  // Hosts count their own failures.
  CHECK(b.add("b", t1) == 10s);
}
