#include <catch2/catch.hpp>

#include "common/error.h"
#include "common/frame.h"

using namespace hvd::frame;

TEST_CASE("frame headers round-trip") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{300}, kMaxFrameBytes}) {
    CHECK(decodeHeader(encodeHeader(n), "peer") == n);
  }
  CHECK(encodeHeader(0x00010203) == Header{0, 1, 2, 3});
}

TEST_CASE("a frame above the cap is refused from its header") {
  REQUIRE_THROWS_AS(encodeHeader(kMaxFrameBytes + 1), hvd::InvalidArgument);
  Header huge = {0xff, 0xff, 0xff, 0xff};
  REQUIRE_THROWS_WITH(decodeHeader(huge, "10.0.0.9:555"),
                      Catch::Contains("10.0.0.9:555") && Catch::Contains("above the cap"));
}
