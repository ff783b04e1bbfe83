// The correctness matrix of the collectives: transport {tcp, shm} x world size {1, 2, 3, 4, 7} x
// element count {0, 1, 17, 1000, one segment + 1, a few MiB (largeCountFor)} x every dtype x
// every op, in place and out of place, through every allreduce algorithm (Rabenseifner's also at
// n = 5, 6, 8, 9 and 16, for its fold and for blocks left empty when count < n). Inputs are
// filled from rank and index so that the expected result has a closed form. Checks inside the
// rank threads use HVD_ENFORCE (Catch2 is not thread-safe); runRanks rethrows the first failure on
// the main thread.
#include <catch2/catch.hpp>

#include <cmath>

#include <algorithm>
#include <atomic>
#include <numeric>

#include "collectives/algorithms/allgather.h"
#include "collectives/operations.h"
#include "test/ranks/counting_comm.h"
#include "test/ranks/host_layouts.h"
#include "test/ranks/run_ranks.h"
#include "test/support/elements.h"

using namespace hvd;
using namespace hvd::collectives;
using namespace hvd::test;

namespace {

constexpr std::size_t kSegmentBytes = 1024;  // small, to reach multi-segment paths
constexpr AllreduceAlgorithm kForcedAlgorithms[] = {AllreduceAlgorithm::Ring,
                                                    AllreduceAlgorithm::RecursiveDoubling,
                                                    AllreduceAlgorithm::Rabenseifner};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max,
                                ReduceOp::Product};

double fill(DType t, ReduceOp op, int rank, std::size_t i) { return fillValue(t, op, rank, i); }
double expected(DType t, ReduceOp op, int n, std::size_t i) { return expectedValue(t, op, n, i); }

// The largest count's payload: a few MiB, for the ring's many segments.
constexpr std::size_t kLargestBytes = 2u << 20;
// Rabenseifner's messages are never segmented, and its matrix runs over up to 16 ranks: a
// quarter MiB still spans several of the test's 64 KiB shm rings and many TCP writes, at an
// eighth of the time.
constexpr std::size_t kRabenseifnerLargestBytes = 256u << 10;

// The large count is there for the many segments (and ring laps) of a MiB payload, which depend
// on its bytes, not on the values: it runs for every dtype (each element size and kernel) with
// Sum, and for every op on float32. The other pairs' kernels are checked by the smaller counts,
// the segment + 1 one included; the large count for every pair was most of the suite's time.
bool largeCountFor(DType t, ReduceOp op) { return op == ReduceOp::Sum || t == DType::Float32; }

// 0 for largestBytes: no large count.
std::vector<std::size_t> countsFor(DType t, ReduceOp op, std::size_t largestBytes) {
  std::size_t elem = dtypeSize(t);
  std::vector<std::size_t> counts{0, 1, 17, 1000, kSegmentBytes / elem + 1};
  if (largestBytes && largeCountFor(t, op)) counts.push_back(largestBytes / elem + 3);
  return counts;
}

// `largestBytes`: the payload of the large count; 0 leaves it out. Recursive doubling handles
// every size the same way (one exchange of the whole buffer per round, no segments), so its
// matrix leaves it out: it was a third of the suite's time and tested nothing the 1000-element
// case does not. Sanitizer builds leave it out everywhere: there it took minutes, and the
// segment + 1 count already crosses segments.
void allreduceMatrix(Comm& comm, const AllreduceOptions& options, const char* algorithm,
                     std::size_t largestBytes = kLargestBytes) {
  int n = comm.size();
  for (DType t : allDTypes())
    for (ReduceOp op : kAllOps) {
      if (t == DType::Bool && op == ReduceOp::Average) continue;
      for (std::size_t count : countsFor(t, op, kSanitized ? 0 : largestBytes))
        for (bool inPlace : {true, false}) {
          std::size_t bytes = count * dtypeSize(t);
          std::vector<std::byte> in(bytes + 1), out(bytes + 1);
          for (std::size_t i = 0; i < count; ++i)
            setElement(in.data(), t, i, fill(t, op, comm.rank(), i));
          void* dst = inPlace ? in.data() : out.data();
          // The MiB payloads still cross many segments with 64 KiB ones; at 1 KiB they cost
          // thousands of messages each and most of the matrix's time, and test nothing more.
          AllreduceOptions o = options;
          if (bytes >= (1u << 20)) o.maxSegmentBytes = 64 * 1024;
          allreduce(comm, in.data(), dst, count, t, op, o);
          for (std::size_t i = 0; i < count; ++i) {
            double got = getElement(dst, t, i), want = expected(t, op, n, i);
            HVD_ENFORCE(close(got, want, t), algorithm, " n=", n, " rank=", comm.rank(), " ",
                        dtypeName(t), " ", reduceOpName(op), " count=", count, " inPlace=", inPlace,
                        ": element ", i, " is ", got, ", want ", want);
            if (!inPlace)
              HVD_ENFORCE(
                  getElement(in.data(), t, i) == fill(t, op, comm.rank(), i) || t == DType::Bool,
                  "out-of-place allreduce changed its input");
          }
        }
    }
}

}  // namespace

TEST_CASE("allreduce matrix: every dtype, op and count, in and out of place, both algorithms",
          "[allreduce]") {
  int n = GENERATE(1, 2, 3, 4, 7);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  INFO("world size " << n);
  REQUIRE_NOTHROW(runRanks(
      n,
      [](Comm& comm) {
        AllreduceOptions ring{kSegmentBytes, 0};
        AllreduceOptions doubling{kSegmentBytes, SIZE_MAX};
        allreduceMatrix(comm, ring, "ring");
        allreduceMatrix(comm, doubling, "recursive doubling", 0);
      },
      over(transport)));
}

TEST_CASE("allreduce matrix through Rabenseifner's algorithm, any n up to 9, and 16",
          "[allreduce]") {
  // 1..9 reach every fold (none, one pair, up to three pairs) and 8 and 16 three and four
  // halving rounds; at 16 the counts 1 and 17 leave blocks empty.
  int n = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9, 16);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  INFO("world size " << n);
  REQUIRE_NOTHROW(runRanks(
      n,
      [](Comm& comm) {
        AllreduceOptions o{kSegmentBytes, 0};
        o.algorithm = AllreduceAlgorithm::Rabenseifner;
        allreduceMatrix(comm, o, "rabenseifner", kRabenseifnerLargestBytes);
      },
      over(transport)));
}

TEST_CASE("allreduce applies prescale and postscale factors", "[allreduce]") {
  int n = GENERATE(1, 3, 4, 6);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  REQUIRE_NOTHROW(runRanks(
      n,
      [n](Comm& comm) {
        for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::Int32})
          for (AllreduceAlgorithm a : kForcedAlgorithms) {
            std::vector<std::byte> buf(300 * dtypeSize(t));
            for (std::size_t i = 0; i < 300; ++i) setElement(buf.data(), t, i, 2.0 * (i % 5));
            AllreduceOptions o{kSegmentBytes, 0, 0.5, 3.0, a};
            allreduce(comm, buf.data(), buf.data(), 300, t, ReduceOp::Average, o);
            for (std::size_t i = 0; i < 300; ++i) {
              double want = (i % 5) * 3.0;  // (2x * 0.5) summed over n, divided by n, times 3
              HVD_ENFORCE(close(getElement(buf.data(), t, i), want, t), allreduceAlgorithmName(a),
                          " ", dtypeName(t), " element ", i, " is ", getElement(buf.data(), t, i),
                          ", want ", want, " n=", n);
            }
          }
      },
      over(transport)));
}

TEST_CASE("a ring or Rabenseifner average equals the sum divided by the ranks, bit for bit",
          "[allreduce]") {
  // The ring finishes each segment, Rabenseifner's each block, on the rank that completes it
  // (and multiplies by the exact reciprocal for a power of two): the values must be those of
  // dividing the whole sum.
  int n = GENERATE(2, 3, 4, 5);
  AllreduceAlgorithm algorithm =
      GENERATE(AllreduceAlgorithm::Ring, AllreduceAlgorithm::Rabenseifner);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport) << " n=" << n << " " << allreduceAlgorithmName(algorithm));
  REQUIRE_NOTHROW(runRanks(
      n,
      [n, algorithm](Comm& comm) {
        const std::size_t count = 100003;
        for (DType t : {DType::Float32, DType::Float64}) {
          std::size_t size = dtypeSize(t);
          std::vector<std::byte> in(count * size), sum(count * size), avg(count * size);
          for (std::size_t i = 0; i < count; ++i)
            setElement(in.data(), t, i, std::sin(0.37 * double(i) + comm.rank()) * 1e3 / 7.0);
          AllreduceOptions o{kSegmentBytes, 0, 1.0, 1.0, algorithm};
          allreduce(comm, in.data(), sum.data(), count, t, ReduceOp::Sum, o);
          allreduce(comm, in.data(), avg.data(), count, t, ReduceOp::Average, o);
          for (std::size_t i = 0; i < count; ++i) {
            bool same = t == DType::Float32
                            ? reinterpret_cast<float*>(avg.data())[i] ==
                                  reinterpret_cast<float*>(sum.data())[i] / float(n)
                            : reinterpret_cast<double*>(avg.data())[i] ==
                                  reinterpret_cast<double*>(sum.data())[i] / double(n);
            HVD_ENFORCE(same, dtypeName(t), " element ", i, ": average ",
                        getElement(avg.data(), t, i), ", sum/n ", getElement(sum.data(), t, i) / n);
          }
        }
      },
      over(transport)));
}

TEST_CASE("hierarchical allreduce matrix: hosts of several ranks, every dtype, op and count",
          "[allreduce]") {
  // The algorithm is the same over either transport (the flat matrix covers both), so each
  // layout runs over one.
  Hosts hosts = GENERATE(Hosts{4, 2, true, Transport::Tcp}, Hosts{6, 3, false, Transport::Tcp},
                         Hosts{6, 2, true, Transport::Shm}, Hosts{3, 1, false, Transport::Tcp});
  INFO(hosts);
  REQUIRE_NOTHROW(runRanks(
      hosts.ranks,
      [&](Comm& comm) {
        attachHosts(comm, hosts, Staged::Allreduce);
        // The threshold picks the algorithm of the stage across hosts.
        allreduceMatrix(comm, AllreduceOptions{kSegmentBytes, 0}, "hierarchical, ring across");
        allreduceMatrix(comm, AllreduceOptions{kSegmentBytes, SIZE_MAX},
                        "hierarchical, recursive doubling across", 0);
        allreduceMatrix(
            comm, AllreduceOptions{kSegmentBytes, 0, 1.0, 1.0, AllreduceAlgorithm::Rabenseifner},
            "hierarchical, rabenseifner across", 0);
        // Whole: recursive doubling within the host, the whole payload across.
        AllreduceOptions whole{kSegmentBytes, 0};
        whole.staging = HierarchicalStaging::Whole;
        allreduceMatrix(comm, whole, "hierarchical whole, ring across");
        whole.ringThresholdBytes = SIZE_MAX;
        allreduceMatrix(comm, whole, "hierarchical whole, recursive doubling across", 0);
        for (AllreduceAlgorithm a : kForcedAlgorithms) {
          std::vector<float> buf(301);
          for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = 2.0f * (i % 5);
          for (HierarchicalStaging staging :
               {HierarchicalStaging::Blocks, HierarchicalStaging::Whole}) {
            for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = 2.0f * (i % 5);
            AllreduceOptions o{kSegmentBytes, 0, 0.5, 3.0, a};
            o.staging = staging;
            allreduce(comm, buf.data(), buf.data(), buf.size(), DType::Float32, ReduceOp::Average,
                      o);
            for (std::size_t i = 0; i < buf.size(); ++i)
              HVD_ENFORCE(buf[i] == (i % 5) * 3.0f, "scaled hierarchical average: element ", i,
                          " is ", buf[i], ", want ", (i % 5) * 3.0f);
          }
        }
      },
      over(hosts.transport)));
  if (hosts.perHost == 1) return;  // the runtime leaves hosts of one rank flat
  // Left to the model (the runtime's default across hosts): a model whose NIC is slow next to
  // memory stages the middle sizes, so the matrix runs both forms on the same communicator.
  NetworkModel model = slowNicModel(hosts.perHost);
  std::atomic<int> stagedSizes = 0;
  REQUIRE_NOTHROW(runRanks(
      hosts.ranks,
      [&](Comm& comm) {
        attachHosts(comm, hosts, Staged::ByModel);
        AllreduceOptions o{kSegmentBytes};
        o.model = &model;
        if (comm.rank() == 0)
          for (std::size_t bytes : {std::size_t{4}, std::size_t{4096}, std::size_t{1} << 20})
            stagedSizes += runsHierarchicalAllreduce(comm, bytes, o);
        allreduceMatrix(comm, o, "hierarchical by the cost model");
      },
      over(hosts.transport)));
  // The model takes consecutive ranks to share a host; interleaved, it may keep all sizes flat.
  if (!hosts.interleaved) CHECK(stagedSizes > 0);
}

namespace {

// Allgathers of every dtype with first dimensions that differ per rank (zero on some), checked
// block by block; then allgathers in place (the input is this rank's block of the output) of
// blocks across several segments.
void allgatherMatrix(Comm& comm, const char* algorithm,
                     AllgatherAlgorithm forced = AllgatherAlgorithm::Auto) {
  int n = comm.size();
  std::vector<std::size_t> largeDone;  // element sizes the large scale has run for
  for (DType t : allDTypes())
    for (int64_t scale : {0, 1, 7, 5000}) {
      // An allgather moves bytes whatever their type: the large blocks run once per element
      // size (the small ones for every dtype), which is where the matrix spent its time.
      if (scale == 5000) {
        if (std::find(largeDone.begin(), largeDone.end(), dtypeSize(t)) != largeDone.end())
          continue;
        largeDone.push_back(dtypeSize(t));
      }
      auto rowsOf = [&](int r) { return static_cast<int64_t>((r * 3 + 1) % 4) * scale; };
      const int64_t width = 3;
      std::vector<std::byte> in(rowsOf(comm.rank()) * width * dtypeSize(t) + 1);
      for (int64_t i = 0; i < rowsOf(comm.rank()) * width; ++i)
        setElement(in.data(), t, i, (comm.rank() + i) % 5);
      std::vector<std::byte> out;
      Tensor result = allgather(
          comm, {in.data(), t, {rowsOf(comm.rank()), width}},
          [&](const std::vector<int64_t>& shape) {
            out.resize(shape[0] * shape[1] * dtypeSize(t) + 1);
            return out.data();
          },
          forced);
      int64_t total = 0;
      for (int r = 0; r < n; ++r) total += rowsOf(r);
      HVD_ENFORCE(result.shape == (std::vector<int64_t>{total, width}), algorithm, ": shape");
      std::size_t k = 0;
      for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < rowsOf(r) * width; ++i, ++k) {
          double want = t == DType::Bool ? ((r + i) % 5 != 0) : (r + i) % 5;
          HVD_ENFORCE(getElement(out.data(), t, k) == want, algorithm, ": ", dtypeName(t),
                      " block of rank ", r, " element ", i, " wrong on rank ", comm.rank());
        }
    }
  for (std::size_t unit : {std::size_t{1}, std::size_t{3000}}) {
    std::vector<std::size_t> bytes;
    for (int r = 0; r < n; ++r) bytes.push_back(unit * ((r * 5 + 2) % 4));
    std::size_t offset =
        std::accumulate(bytes.begin(), bytes.begin() + comm.rank(), std::size_t{0});
    std::vector<uint8_t> out(std::accumulate(bytes.begin(), bytes.end(), std::size_t{0}), 0xEE);
    for (std::size_t i = 0; i < bytes[comm.rank()]; ++i)
      out[offset + i] = static_cast<uint8_t>(comm.rank() * 37 + i);
    allgatherv(comm, out.data() + offset, out.data(), bytes, kSegmentBytes, forced);
    std::size_t k = 0;
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < bytes[r]; ++i, ++k)
        HVD_ENFORCE(out[k] == static_cast<uint8_t>(r * 37 + i), algorithm,
                    ": in-place allgather, block of rank ", r, " byte ", i, " wrong on rank ",
                    comm.rank());
  }
}

}  // namespace

TEST_CASE("allgather concatenates first dimensions that differ per rank: ring, Bruck's, auto",
          "[allgather]") {
  // Bruck's rounds send runs that wrap past the last block from n = 3, and at n that is not a
  // power of two a last round shorter than the others; zero-sized blocks (rowsOf(r) == 0 at
  // r % 4 == 1, the in-place bytes at r % 4 == 2) must send nothing on both ends.
  int n = GENERATE(1, 2, 3, 4, 5, 6, 7, 8, 9, 16);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  struct Named {
    AllgatherAlgorithm algorithm;
    const char* name;
  };
  for (const Named& each :
       {Named{AllgatherAlgorithm::Ring, "ring"}, Named{AllgatherAlgorithm::Bruck, "bruck"},
        Named{AllgatherAlgorithm::Auto, "auto"}}) {
    INFO(each.name);
    REQUIRE_NOTHROW(runRanks(
        n, [&](Comm& comm) { allgatherMatrix(comm, each.name, each.algorithm); }, over(transport)));
  }
}

namespace {

// What each of n ranks sends in auto's allgather of one int32 each over `transport` (checked).
std::vector<test::Traffic> allgatherTraffic(int n, Transport transport) {
  std::vector<test::Traffic> traffic(n);
  REQUIRE_NOTHROW(runRanks(
      n,
      [&](Comm& comm) {
        auto counted = test::countingComm(comm, traffic[comm.rank()]);
        int32_t mine = comm.rank();
        std::vector<int32_t> all(n, -1);
        allgatherv(*counted, &mine, all.data(), std::vector<std::size_t>(n, 4));
        for (int r = 0; r < n; ++r) HVD_ENFORCE_EQ(all[r], r);
      },
      over(transport)));
  return traffic;
}

}  // namespace

TEST_CASE("auto allgather takes Bruck's rounds for small blocks and the ring for large ones",
          "[allgather]") {
  CHECK(chooseFlatAllgather(3, 12) == AllgatherAlgorithm::Ring);  // both: 2 rounds
  CHECK(chooseFlatAllgather(4, 16) == AllgatherAlgorithm::Bruck);
  CHECK(chooseFlatAllgather(64, 64 * 8192) == AllgatherAlgorithm::Bruck);
  CHECK(chooseFlatAllgather(64, 64 * 8192 + 1) == AllgatherAlgorithm::Ring);
  CHECK(chooseFlatAllgather(1024, 1024 * 1024) == AllgatherAlgorithm::Bruck);
  // Through real links: at 9 ranks, 4-byte blocks go in Bruck's 4 rounds, one to each of the
  // ranks 1, 2, 4 and 8 below (the ring's 8 steps would all go to the rank above), and each
  // rank sends the 8 blocks the others lack once.
  std::vector<test::Traffic> overTcp = allgatherTraffic(9, Transport::Tcp);
  for (int r = 0; r < 9; ++r) {
    INFO("rank " << r << ": " << test::describe(overTcp[r]));
    CHECK(overTcp[r].peers == std::set<int>{(r + 8) % 9, (r + 7) % 9, (r + 5) % 9, (r + 1) % 9});
    CHECK(overTcp[r].bytes == 8 * 4);
  }
  // Over shared memory each extra peer would take a ring of /dev/shm: the ring's one peer.
  CHECK(chooseFlatAllgather(64, 64, true) == AllgatherAlgorithm::Ring);
  std::vector<test::Traffic> overShm = allgatherTraffic(9, Transport::Shm);
  for (int r = 0; r < 9; ++r) {
    INFO("rank " << r << " over shared memory: " << test::describe(overShm[r]));
    CHECK(overShm[r].peers == std::set<int>{(r + 1) % 9});
  }
}

TEST_CASE("hierarchical allgather matrix: hosts of several ranks, contiguous and interleaved",
          "[allgather]") {
  // Each placement scatters a host's columns differently over the output: contiguous hosts
  // interleave them, interleaved hosts (and one rank per host) keep each column contiguous.
  Hosts hosts = GENERATE(Hosts{4, 2, true, Transport::Tcp}, Hosts{6, 3, false, Transport::Tcp},
                         Hosts{6, 2, true, Transport::Shm}, Hosts{6, 2, false, Transport::Shm},
                         Hosts{3, 1, false, Transport::Tcp});
  INFO(hosts);
  REQUIRE_NOTHROW(runRanks(
      hosts.ranks,
      [&](Comm& comm) {
        attachHosts(comm, hosts, Staged::Allgather);
        allgatherMatrix(comm, "hierarchical allgather");
      },
      over(hosts.transport)));
}

TEST_CASE("alltoall with per-rank splits returns the received splits", "[alltoall]") {
  int n = GENERATE(1, 2, 3, 4, 7);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  REQUIRE_NOTHROW(runRanks(
      n,
      [n](Comm& comm) {
        int r = comm.rank();
        for (int64_t scale : {0, 1, 3000}) {
          // rank r sends (r + j) % 3 * scale rows to rank j, plus one spare row it keeps unsent
          std::vector<int64_t> splits;
          for (int j = 0; j < n; ++j) splits.push_back((r + j) % 3 * scale);
          int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0}) + 1;
          const int64_t width = 2;
          std::vector<int32_t> in(rows * width);
          int64_t row = 0;
          for (int j = 0; j < n; ++j)
            for (int64_t k = 0; k < splits[j]; ++k, ++row)
              for (int64_t c = 0; c < width; ++c)
                in[row * width + c] = r * 1000000 + j * 1000 + static_cast<int32_t>(k % 1000);
          std::vector<int32_t> out;
          auto result = alltoall(comm, {in.data(), DType::Int32, {rows, width}}, splits,
                                 [&](const std::vector<int64_t>& shape) {
                                   out.resize(shape[0] * shape[1] + 1);
                                   return out.data();
                                 });
          std::size_t at = 0;
          for (int j = 0; j < n; ++j) {
            HVD_ENFORCE_EQ(result.receivedSplits[j], (j + r) % 3 * scale, "split from rank ", j);
            for (int64_t k = 0; k < result.receivedSplits[j]; ++k)
              for (int64_t c = 0; c < width; ++c, ++at)
                HVD_ENFORCE_EQ(out[at], j * 1000000 + r * 1000 + static_cast<int32_t>(k % 1000),
                               "row ", k, " from rank ", j, " on rank ", r);
          }
        }
        // equal split by default
        std::vector<int64_t> in(2 * n);
        for (int j = 0; j < 2 * n; ++j) in[j] = r * 100 + j;
        std::vector<int64_t> out(2 * n);
        auto result = alltoall(comm, {in.data(), DType::Int64, {2 * n}}, {},
                               [&](const std::vector<int64_t>&) { return out.data(); });
        for (int j = 0; j < n; ++j) {
          HVD_ENFORCE_EQ(result.receivedSplits[j], 2);
          HVD_ENFORCE_EQ(out[2 * j], j * 100 + 2 * r);
          HVD_ENFORCE_EQ(out[2 * j + 1], j * 100 + 2 * r + 1);
        }
      },
      over(transport)));
}

TEST_CASE("reducescatter gives each rank its reduced part", "[reducescatter]") {
  int n = GENERATE(1, 2, 3, 4, 7);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  REQUIRE_NOTHROW(runRanks(
      n,
      [n](Comm& comm) {
        for (DType t :
             {DType::Int32, DType::Float32, DType::Float16, DType::BFloat16, DType::Int64})
          for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average})
            for (int64_t rows :
                 {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{2 * n + 1}, int64_t{70001}}) {
              const int64_t width = 3;
              std::vector<std::byte> in(rows * width * dtypeSize(t) + 1);
              for (int64_t i = 0; i < rows * width; ++i)
                setElement(in.data(), t, i, fill(t, op, comm.rank(), i));
              std::vector<std::byte> out;
              Tensor result = reducescatter(comm, {in.data(), t, {rows, width}}, op,
                                            [&](const std::vector<int64_t>& shape) {
                                              out.resize(shape[0] * shape[1] * dtypeSize(t) + 1);
                                              return out.data();
                                            });
              int64_t base = rows / n, extra = rows % n, r = comm.rank();
              int64_t myRows = base + (r < extra ? 1 : 0), firstRow = r * base + std::min(r, extra);
              HVD_ENFORCE_EQ(result.shape[0], myRows);
              for (int64_t i = 0; i < myRows * width; ++i) {
                std::size_t global = static_cast<std::size_t>(firstRow * width + i);
                double got = getElement(out.data(), t, i), want = expected(t, op, n, global);
                HVD_ENFORCE(close(got, want, t), dtypeName(t), " ", reduceOpName(op), " rows ",
                            rows, " element ", i, ": ", got, " want ", want);
              }
            }
      },
      over(transport)));
}

TEST_CASE("invalid arguments name the bad value") {
  auto failsWith = [](int n, const std::function<void(Comm&)>& fn) {
    try {
      runRanks(n, fn);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no InvalidArgument");
  };
  int x[4] = {};
  CHECK_THAT(failsWith(2,
                       [&](Comm& c) {
                         broadcast(c, Tensor{x, DType::Int32, {1}}, 2);
                       }),
             Catch::Contains("root rank 2 is outside [0, 2)"));
  CHECK_THAT(failsWith(2,
                       [&](Comm& c) {
                         broadcast(c, Tensor{x, DType::Int32, {1}}, -1);
                       }),
             Catch::Contains("root rank -1"));
  CHECK_THAT(
      failsWith(2,
                [&](Comm& c) {
                  int buf[4] = {};
                  alltoall(c, {buf, DType::Int32, {4}}, {3, 2}, [](auto&) { return nullptr; });
                }),
      Catch::Contains("splits sum to 5 rows but the first dimension is 4"));
  CHECK_THAT(
      failsWith(2,
                [&](Comm& c) {
                  int buf[4] = {};
                  alltoall(c, {buf, DType::Int32, {4}}, {-1, 2}, [](auto&) { return nullptr; });
                }),
      Catch::Contains("negative split -1"));
  CHECK_THAT(failsWith(3,
                       [&](Comm& c) {
                         int buf[4] = {};
                         alltoall(c, {buf, DType::Int32, {4}}, {}, [](auto&) { return nullptr; });
                       }),
             Catch::Contains("first dimension 4 does not divide into 3"));
  CHECK_THAT(failsWith(2,
                       [&](Comm& c) {
                         float v = 1;
                         reducescatter(c, {&v, DType::Float32, {}}, ReduceOp::Sum,
                                       [](auto&) { return nullptr; });
                       }),
             Catch::Contains("reducescatter: cannot scatter a scalar"));
  CHECK_THAT(failsWith(2,
                       [&](Comm& c) {
                         float v[2] = {};
                         reducescatter(c, {v, DType::Float32, {2}}, ReduceOp::Max,
                                       [](auto&) { return nullptr; });
                       }),
             Catch::Contains("reduce op max is not supported"));
  CHECK_THAT(
      failsWith(
          3,
          [&](Comm& c) {
            std::vector<float> v(6);
            int64_t width = c.rank() == 1 ? 3 : 2;
            std::vector<float> out(100);
            allgather(c, {v.data(), DType::Float32, {2, width}}, [&](auto&) { return out.data(); });
          }),
      Catch::Contains("ranks {1} have a different dtype or trailing dimensions"));
  CHECK_THAT(failsWith(2,
                       [&](Comm& c) {
                         uint8_t b[2] = {};
                         allreduce(c, b, b, 2, DType::Bool, ReduceOp::Average);
                       }),
             Catch::Contains("average is not defined for dtype bool"));
}

TEST_CASE("no rank leaves a barrier before every rank has entered it", "[barrier]") {
  int n = GENERATE(2, 3, 5, 7);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport));
  std::atomic<int> entered{0};
  std::atomic<int> early{0};
  runRanks(
      n,
      [&](Comm& comm) {
        for (int round = 1; round <= 3; ++round) {
          std::this_thread::sleep_for(std::chrono::milliseconds(comm.rank() * 3));
          entered++;
          barrier(comm);
          if (entered.load() < round * n) early++;
          barrier(comm);
        }
      },
      over(transport));
  REQUIRE(early.load() == 0);
}
