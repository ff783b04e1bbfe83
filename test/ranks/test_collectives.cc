#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/broadcast.h"
#include "collectives/algorithms/half.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;

namespace {

constexpr std::size_t kSegmentBytes = 256;  // tiny, to reach the multi-segment paths

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<int32_t>() { return DType::Int32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::Int64; }
template <> constexpr DType dtypeOf<float>() { return DType::Float32; }
template <> constexpr DType dtypeOf<double>() { return DType::Float64; }

// Rank r contributes (r + 1) * (i % 7 + 1): the sum over n ranks is n(n+1)/2 * (i % 7 + 1).
double contribution(int rank, std::size_t i) { return (rank + 1) * static_cast<double>(i % 7 + 1); }

template <typename T>
void checkAllreduceSum(int n, std::size_t count, bool inPlace) {
  std::vector<std::vector<T>> results(n);
  test::runRanks(n, [&](Comm& comm) {
    std::vector<T> in(count), out(count);
    for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<T>(contribution(comm.rank(), i));
    T* dst = inPlace ? in.data() : out.data();
    allreduce(comm, in.data(), dst, count, dtypeOf<T>(), ReduceOp::Sum, {kSegmentBytes});
    results[comm.rank()] = inPlace ? in : out;
    if (!inPlace)  // the input is left untouched
      for (std::size_t i = 0; i < count; ++i)
        HVD_ENFORCE(in[i] == static_cast<T>(contribution(comm.rank(), i)));
  });
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i) {
      double want = n * (n + 1) / 2.0 * (i % 7 + 1);
      if (static_cast<double>(results[r][i]) != want)
        FAIL("rank " << r << " element " << i << ": got " << results[r][i] << ", want " << want);
    }
}

}  // namespace

TEMPLATE_TEST_CASE("ring allreduce sums for every world size and count", "[allreduce]", int32_t,
                   int64_t, float, double) {
  int n = GENERATE(1, 2, 3, 4, 7);
  std::size_t count = GENERATE(std::size_t{0}, std::size_t{1}, std::size_t{17}, std::size_t{1000},
                               kSegmentBytes / sizeof(TestType) + 1);
  bool inPlace = GENERATE(true, false);
  INFO("n=" << n << " count=" << count << " inPlace=" << inPlace);
  checkAllreduceSum<TestType>(n, count, inPlace);
}

TEST_CASE("allreduce min, max, product and average", "[allreduce]") {
  int n = GENERATE(2, 3, 7);
  std::size_t count = 301;
  std::vector<std::vector<int32_t>> got(4 * n);
  test::runRanks(n, [&](Comm& comm) {
    ReduceOp ops[] = {ReduceOp::Min, ReduceOp::Max, ReduceOp::Product, ReduceOp::Average};
    for (int k = 0; k < 4; ++k) {
      std::vector<int32_t> v(count);
      for (std::size_t i = 0; i < count; ++i)
        v[i] = ops[k] == ReduceOp::Product ? (comm.rank() + 1) * static_cast<int32_t>(i % 2 + 1)
                                           : static_cast<int32_t>(contribution(comm.rank(), i));
      allreduce(comm, v.data(), v.data(), count, DType::Int32, ops[k], {kSegmentBytes});
      got[k * n + comm.rank()] = v;
    }
  });
  int factorial = 1;
  for (int k = 2; k <= n; ++k) factorial *= k;
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i) {
      int base = static_cast<int>(i % 7 + 1);
      REQUIRE(got[0 * n + r][i] == base);
      REQUIRE(got[1 * n + r][i] == n * base);
      REQUIRE(got[2 * n + r][i] == factorial * static_cast<int>(std::pow(i % 2 + 1, n)));
      REQUIRE(got[3 * n + r][i] == (n + 1) * base / 2);
    }
}

TEST_CASE("float16 allreduce accumulates in float32", "[allreduce]") {
  int n = GENERATE(2, 4);
  std::size_t count = 1000;
  std::vector<std::vector<uint16_t>> got(n);
  test::runRanks(n, [&](Comm& comm) {
    std::vector<uint16_t> v(count);
    for (std::size_t i = 0; i < count; ++i)
      v[i] = floatToHalf(static_cast<float>(contribution(comm.rank(), i)));
    allreduce(comm, v.data(), v.data(), count, DType::Float16, ReduceOp::Sum, {kSegmentBytes});
    got[comm.rank()] = v;
  });
  for (int r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i)
      REQUIRE(halfToFloat(got[r][i]) == n * (n + 1) / 2.0f * (i % 7 + 1));
}

TEST_CASE("broadcast from every root", "[broadcast]") {
  int n = GENERATE(1, 2, 3, 4, 7);
  std::size_t bytes = GENERATE(std::size_t{0}, std::size_t{1}, std::size_t{4097});
  for (int root = 0; root < n; ++root) {
    std::vector<std::vector<uint8_t>> got(n);
    test::runRanks(n, [&](Comm& comm) {
      std::vector<uint8_t> buf(bytes, 0xEE);
      if (comm.rank() == root)
        for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(i * 31 + root);
      broadcast(comm, buf.data(), bytes, root);
      got[comm.rank()] = buf;
    });
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < bytes; ++i)
        REQUIRE(got[r][i] == static_cast<uint8_t>(i * 31 + root));
  }
}

TEST_CASE("broadcast rejects a root outside the world", "[broadcast]") {
  REQUIRE_THROWS_WITH(test::runRanks(2,
                                     [](Comm& comm) {
                                       int x = 0;
                                       broadcast(comm, &x, sizeof x, 2);
                                     }),
                      Catch::Contains("root rank 2 is outside [0, 2)"));
}

TEST_CASE("no rank leaves a barrier before every rank has entered it", "[barrier]") {
  int n = GENERATE(2, 3, 5, 7);
  std::atomic<int> entered{0};
  std::atomic<int> early{0};
  test::runRanks(n, [&](Comm& comm) {
    for (int round = 1; round <= 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(comm.rank() * 3));
      entered++;
      barrier(comm);
      if (entered.load() < round * n) early++;
      barrier(comm);
    }
  });
  REQUIRE(early.load() == 0);
}
