// Allreduce runs the algorithm it is told to (AllreduceOptions::algorithm), or Auto's choice:
// each algorithm is recognised by the traffic every rank sends (messages, bytes, peers), which
// its file states. The results' correctness over every dtype, op and count is
// test_collectives.cc's matrix; here each run also checks its sum.
#include <catch2/catch.hpp>

#include <vector>

#include "collectives/algorithms/allreduce.h"
#include "test/ranks/counting_comm.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using namespace hvd::test;

namespace {

constexpr std::size_t kCount = 1000;  // float32: 4000 bytes, 1000 per block of four

enum class Layout { Flat, OneRankPerHost };

// What each rank sent in one allreduce (a sum of `count` floats) with `options` over n ranks.
// OneRankPerHost runs the hierarchical form with hosts of one rank, whose stage across hosts
// is a flat allreduce over all ranks.
std::vector<Traffic> trafficOf(int n, const AllreduceOptions& options, Layout layout = Layout::Flat,
                               std::size_t count = kCount) {
  std::vector<Traffic> byRank(n);
  runRanks(n, [&](Comm& comm) {
    auto counting = countingComm(comm, byRank[comm.rank()]);
    if (layout == Layout::OneRankPerHost) {
      std::vector<int> all;
      std::vector<std::vector<int>> hosts;
      for (int r = 0; r < n; ++r) {
        all.push_back(r);
        hosts.push_back({r});
      }
      counting->setHierarchy(
          {counting->subset({comm.rank()}), counting->subset(all), hosts, true, false});
    }
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = float(comm.rank() + i % 7);
    allreduce(*counting, data.data(), data.data(), count, DType::Float32, ReduceOp::Sum, options);
    for (std::size_t i = 0; i < count; ++i) {
      float want = float(n * (i % 7) + n * (n - 1) / 2);
      HVD_ENFORCE(data[i] == want, allreduceAlgorithmName(options.algorithm), " n=", n, " rank ",
                  comm.rank(), ": element ", i, " is ", data[i], ", want ", want);
    }
  });
  return byRank;
}

AllreduceOptions forcing(AllreduceAlgorithm algorithm, std::size_t ringThreshold = 128 * 1024) {
  AllreduceOptions o;
  o.ringThresholdBytes = ringThreshold;
  o.algorithm = algorithm;
  return o;
}

// Over 4 ranks, 4000 bytes: every rank sends
std::vector<Traffic> ringOf4() {  // 2(n-1) blocks of 1000 bytes to its right neighbour
  return {{6, 6000, {1}}, {6, 6000, {2}}, {6, 6000, {3}}, {6, 6000, {0}}};
}
std::vector<Traffic> doublingOf4() {  // its whole buffer to r xor 1, then r xor 2
  return {{2, 8000, {1, 2}}, {2, 8000, {0, 3}}, {2, 8000, {3, 0}}, {2, 8000, {2, 1}}};
}
std::vector<Traffic> rabenseifnerOf4() {  // halves 2000, 1000 to r xor 2, r xor 1; back again
  return {{4, 6000, {1, 2}}, {4, 6000, {0, 3}}, {4, 6000, {3, 0}}, {4, 6000, {2, 1}}};
}

void requireTraffic(const std::vector<Traffic>& got, const std::vector<Traffic>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t r = 0; r < got.size(); ++r) {
    INFO("rank " << r << " sent " << describe(got[r]) << ", want " << describe(want[r]));
    CHECK(got[r] == want[r]);
  }
}

}  // namespace

TEST_CASE("each forced allreduce algorithm sends its own traffic", "[allreduce]") {
  SECTION("ring") { requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Ring)), ringOf4()); }
  SECTION("recursive doubling, also above the ring threshold") {
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::RecursiveDoubling, 0)), doublingOf4());
  }
  SECTION("rabenseifner") {
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Rabenseifner)), rabenseifnerOf4());
  }
  SECTION("auto: recursive doubling below the ring threshold, the ring from it") {
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Auto)), doublingOf4());
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Auto, 4000)), ringOf4());
  }
  SECTION("the hierarchical form's stage across hosts takes the forced algorithm") {
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Rabenseifner), Layout::OneRankPerHost),
                   rabenseifnerOf4());
    requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Ring), Layout::OneRankPerHost),
                   ringOf4());
  }
}

TEST_CASE("rabenseifner folds neighbouring pairs for a non-power of two", "[allreduce]") {
  // n = 6: ranks 0 and 2 hand their 4000 bytes to 1 and 3 and get the result back; 1, 3, 4
  // and 5 halve and double as four ranks (0..3), 1 and 3 also sending the result back.
  requireTraffic(trafficOf(6, forcing(AllreduceAlgorithm::Rabenseifner)), {{1, 4000, {1}},
                                                                           {5, 10000, {0, 3, 4}},
                                                                           {1, 4000, {3}},
                                                                           {5, 10000, {1, 2, 5}},
                                                                           {4, 6000, {1, 5}},
                                                                           {4, 6000, {3, 4}}});
}

TEST_CASE("rabenseifner sends no message for a block left empty", "[allreduce]") {
  // 2 floats over 4 ranks: blocks of 1, 1, 0 and 0. At distance 1 ranks 1 and 3 hand both
  // floats to 0 and 2 and keep the empty half; 0 and 2 swap a float each way at distance 2,
  // then pass the result back to 1 and 3. Nothing is sent for the empty half.
  requireTraffic(trafficOf(4, forcing(AllreduceAlgorithm::Rabenseifner), Layout::Flat, 2),
                 {{3, 16, {1, 2}}, {1, 8, {0}}, {3, 16, {0, 3}}, {1, 8, {2}}});
}
