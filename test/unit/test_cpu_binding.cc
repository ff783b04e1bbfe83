// How a host's CPUs are shared among its local ranks (slices, compute-thread shares), and the
// registry's check of HVD_BIND_TO. Binding a real process is tested end to end
// (test/e2e/test_hvdrun_runs.py).
#include <catch2/catch.hpp>

#include <set>

#include "common/error.h"
#include "common/params.h"
#include "runtime/config.h"
#include "runtime/cpu_binding.h"

using namespace hvd::runtime;

TEST_CASE("local ranks get contiguous, disjoint slices that cover the CPUs") {
  std::vector<int> cpus = {0, 1, 2, 3, 8, 9, 10};  // an affinity mask need not be contiguous
  for (int localSize = 1; localSize <= 7; ++localSize) {
    std::vector<int> covered;
    std::size_t smallest = cpus.size(), largest = 0;
    for (int r = 0; r < localSize; ++r) {
      auto slice = cpuSliceFor(cpus, r, localSize);
      REQUIRE_FALSE(slice.empty());
      smallest = std::min(smallest, slice.size());
      largest = std::max(largest, slice.size());
      covered.insert(covered.end(), slice.begin(), slice.end());
    }
    CHECK(covered == cpus);  // in order, each CPU once
    CHECK(largest - smallest <= 1);
  }
  CHECK(cpuSliceFor({0, 1}, 0, 2) == std::vector<int>{0});
  CHECK(cpuSliceFor({0, 1}, 1, 2) == std::vector<int>{1});
  CHECK(cpuSliceFor({0, 1, 2, 3}, 1, 2) == std::vector<int>{2, 3});
}

TEST_CASE("more local ranks than CPUs, or a rank outside the host, get no slice") {
  CHECK(cpuSliceFor({0, 1}, 0, 3).empty());
  CHECK(cpuSliceFor({}, 0, 1).empty());
  CHECK(cpuSliceFor({0, 1}, 2, 2).empty());
  CHECK(cpuSliceFor({0, 1}, -1, 2).empty());
}

TEST_CASE("a rank's compute-thread share: its slice, its launcher's mask, or an even split") {
  // Bound by hvd: the slice is the rank's own.
  CHECK(cpuShare({.allowedCpus = 3, .onlineCpus = 16, .localSize = 5, .boundByHvd = true}) == 3);
  // Unbound (HVD_BIND_TO=none, or more ranks than CPUs): the local ranks split the mask.
  CHECK(cpuShare({.allowedCpus = 16, .onlineCpus = 16, .localSize = 4}) == 4);
  CHECK(cpuShare({.allowedCpus = 8, .onlineCpus = 64, .localSize = 2}) == 4);  // a cpuset
  CHECK(cpuShare({.allowedCpus = 7, .onlineCpus = 7, .localSize = 2}) == 3);
  CHECK(cpuShare({.allowedCpus = 2, .onlineCpus = 2, .localSize = 3}) == 1);  // never 0
  // srun or mpirun that narrowed the mask chose this rank's CPUs; one that did not left a split.
  CHECK(cpuShare({.allowedCpus = 4, .onlineCpus = 16, .localSize = 4, .externalLauncher = true}) ==
        4);
  CHECK(cpuShare({.allowedCpus = 16, .onlineCpus = 16, .localSize = 4, .externalLauncher = true}) ==
        4);
  CHECK(cpuShare({.allowedCpus = 1, .onlineCpus = 1, .localSize = 1}) == 1);
}

TEST_CASE(
    "the CPUs a host's ranks share: none to count where hvd bound them, else the mask or "
    "the host's") {
  CHECK(cpusOfLocalRanks({.allowedCpus = 1, .onlineCpus = 2, .localSize = 2, .boundByHvd = true}) ==
        0);
  CHECK(cpusOfLocalRanks({.allowedCpus = 1, .onlineCpus = 16, .localSize = 2}) == 1);  // taskset
  CHECK(cpusOfLocalRanks({.allowedCpus = 2, .onlineCpus = 2, .localSize = 16}) == 2);
  CHECK(cpusOfLocalRanks({.allowedCpus = 0, .onlineCpus = 2, .localSize = 16}) == 0);  // unknown
  // srun or mpirun may have given this rank a mask of its own: the host's CPUs.
  CHECK(cpusOfLocalRanks(
            {.allowedCpus = 1, .onlineCpus = 16, .localSize = 8, .externalLauncher = true}) == 16);
  // An unknown mask still leaves a compute thread.
  CHECK(cpuShare({.allowedCpus = 0, .onlineCpus = 2, .localSize = 2}) == 1);
}

TEST_CASE("CPU lists print as /proc and taskset write them") {
  CHECK(cpuListText({0}) == "0");
  CHECK(cpuListText({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(cpuListText({}).empty());
}

TEST_CASE("this process may run on at least one CPU, and binding to all of them succeeds") {
  auto allowed = allowedCpus();
  REQUIRE_FALSE(allowed.empty());
  bindProcessTo(allowed);  // a no-op on the set it already has
  CHECK(allowedCpus() == allowed);
}

TEST_CASE("HVD_BIND_TO takes core or none; anything else is refused naming the variable") {
  using hvd::params::ParamValues;
  CHECK(Config::fromParams(ParamValues::fromMap({})).cpuBinding == CpuBinding::Core);
  CHECK(Config::fromParams(ParamValues::fromMap({{"HVD_BIND_TO", "none"}})).cpuBinding ==
        CpuBinding::None);
  CHECK_THROWS_WITH(
      ParamValues::fromMap({{"HVD_BIND_TO", "socket"}}),
      Catch::Contains("HVD_BIND_TO='socket'") && Catch::Contains("expected one of core, none"));
}
