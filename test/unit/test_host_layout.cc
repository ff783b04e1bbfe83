#include <catch2/catch.hpp>

#include "runtime/engine/host_layout.h"

using hvd::runtime::HostLayout;

TEST_CASE("host layout groups ranks by host in the order of their first rank") {
  auto layout = HostLayout::of({"b", "a", "b", "a"});
  CHECK(layout.hosts == std::vector<std::string>{"b", "a"});
  CHECK(layout.ranksOf == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
  CHECK(layout.even());
  CHECK(layout.text() == "b: 2, a: 2");
  CHECK(layout.localRanks(3) == std::vector<int>{1, 3});
  CHECK(layout.crossRanks(2) == std::vector<int>{2, 3});  // index 1 on each host
  CHECK(layout.crossRanks(1) == std::vector<int>{0, 1});
}

TEST_CASE("host layout of uneven hosts has no cross-host ranks") {
  auto layout = HostLayout::of({"a", "a", "b"});
  CHECK_FALSE(layout.even());
  CHECK(layout.text() == "a: 2, b: 1");
  CHECK_THROWS_WITH(layout.crossRanks(0),
                    Catch::Contains("as many ranks on every host (a: 2, b: 1)"));
}
