#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/rank_assignment.h"

using namespace hvd::launcher;

TEST_CASE("ranks fill hosts in order and get local and cross ranks") {
  auto r = assignRanks({{"a", 2}, {"b", 2}, {"c", 1}}, 5);
  REQUIRE(r.size() == 5);
  struct Want {
    const char* host;
    int local, localSize, cross, crossSize;
  };
  Want want[] = {{"a", 0, 2, 0, 3},
                 {"a", 1, 2, 0, 2},
                 {"b", 0, 2, 1, 3},
                 {"b", 1, 2, 1, 2},
                 {"c", 0, 1, 2, 3}};
  for (int i = 0; i < 5; ++i) {
    INFO("rank " << i);
    CHECK(r[i].rank == i);
    CHECK(r[i].size == 5);
    CHECK(r[i].hostname == want[i].host);
    CHECK(r[i].localRank == want[i].local);
    CHECK(r[i].localSize == want[i].localSize);
    CHECK(r[i].crossRank == want[i].cross);
    CHECK(r[i].crossSize == want[i].crossSize);
  }
}

TEST_CASE("np caps the ranks when more slots are listed") {
  auto r = assignRanks({{"a", 4}, {"b", 4}}, 3);
  REQUIRE(r.size() == 3);
  for (auto& p : r) {
    CHECK(p.hostname == "a");
    CHECK(p.localSize == 3);
    CHECK(p.crossSize == 1);
  }
}

TEST_CASE("np beyond the slots or below one is rejected") {
  REQUIRE_THROWS_WITH(
      assignRanks({{"a", 2}, {"b", 1}}, 4),
      Catch::Contains("-np 4 is more than the 3 slots") && Catch::Contains("a:2,b:1"));
  REQUIRE_THROWS_AS(assignRanks({{"a", 2}}, 0), hvd::InvalidArgument);
  REQUIRE_THROWS_WITH(assignRanks({{"a", 2}}, 0), Catch::Contains("-np 0"));
}
