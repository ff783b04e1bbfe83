#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "collectives/algorithms/half.h"
#include "collectives/algorithms/reduce.h"
#include "common/error.h"

using namespace hvd::collectives;

TEST_CASE("float16 conversion is exact for representable values and rounds to nearest even") {
  for (float f :
       {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 5.9604645e-08f, 1025.0f, 0.5f}) {
    INFO(f);
    CHECK(halfToFloat(floatToHalf(f)) == f);
  }
  CHECK(std::isinf(halfToFloat(floatToHalf(70000.0f))));
  CHECK(std::isnan(halfToFloat(floatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(halfToFloat(floatToHalf(2049.0f)) == 2048.0f);  // tie rounds to even
  CHECK(halfToFloat(floatToHalf(2051.0f)) == 2052.0f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half survives the round trip
    if (floatToHalf(halfToFloat(static_cast<uint16_t>(h))) != h) FAIL("half " << h);
  }
}

TEST_CASE("bfloat16 conversion keeps the float's exponent and rounds the mantissa") {
  CHECK(bf16ToFloat(floatToBf16(1.0f)) == 1.0f);
  CHECK(bf16ToFloat(floatToBf16(-3.0e38f)) == Approx(-3.0e38f).epsilon(0.01));
  CHECK(bf16ToFloat(floatToBf16(1.00390625f)) == 1.0f);  // tie rounds to even
  CHECK(std::isnan(bf16ToFloat(floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("reductions per op and dtype") {
  int32_t a[3] = {1, -5, 7}, b[3] = {4, 2, -7};
  reduceInto(a, b, 3, DType::Int32, ReduceOp::Max);
  CHECK((a[0] == 4 && a[1] == 2 && a[2] == 7));
  double x[2] = {1.5, 2}, y[2] = {2, -3};
  reduceInto(x, y, 2, DType::Float64, ReduceOp::Product);
  CHECK((x[0] == 3 && x[1] == -6));
  uint16_t h[1] = {floatToHalf(1.5f)}, g[1] = {floatToHalf(2.25f)};
  reduceInto(h, g, 1, DType::Float16, ReduceOp::Sum);
  CHECK(halfToFloat(h[0]) == 3.75f);
  uint8_t p[2] = {1, 0}, q[2] = {0, 0};
  reduceInto(p, q, 2, DType::Bool, ReduceOp::Sum);
  CHECK((p[0] == 1 && p[1] == 0));
  REQUIRE_THROWS_AS(reduceInto(p, q, 2, DType::Bool, ReduceOp::Average), hvd::InvalidArgument);
  // uint16 compares unsigned (65000 is negative as int16) and its sum wraps modulo 2^16.
  uint16_t u[2] = {65000, 3}, v[2] = {7, 65535};
  reduceInto(u, v, 2, DType::UInt16, ReduceOp::Max);
  CHECK((u[0] == 65000 && u[1] == 65535));
  reduceInto(u, v, 2, DType::UInt16, ReduceOp::Sum);
  CHECK((u[0] == 65007 && u[1] == 65534));
  CHECK(dtypeSize(parseDType("uint16")) == 2);
  REQUIRE_THROWS_WITH(parseDType("float8"), Catch::Contains("float8"));
}

TEST_CASE("the float16 kernel matches element-wise float32 arithmetic exactly") {
  // On CPUs with F16C this runs the vector path; both must round the same way.
  std::vector<uint16_t> a(1003), b(1003);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = floatToHalf(static_cast<float>(i) * 0.37f - 100.0f);
    b[i] = floatToHalf(static_cast<float>(i % 17) * 1.13f + 0.001f);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Product}) {
    std::vector<uint16_t> got = a;
    reduceInto(got.data(), b.data(), got.size(), DType::Float16, op);
    for (std::size_t i = 0; i < a.size(); ++i) {
      float x = halfToFloat(a[i]), y = halfToFloat(b[i]);
      float want = op == ReduceOp::Sum   ? x + y
                   : op == ReduceOp::Min ? std::min(x, y)
                   : op == ReduceOp::Max ? std::max(x, y)
                                         : x * y;
      if (got[i] != floatToHalf(want)) FAIL(reduceOpName(op) << " element " << i);
    }
  }
}
