// Adasum over real transports, against a reference that combines the ranks' whole vectors
// pairwise in the same tree (rank pairs (0,1), (2,3), ... first), in float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>

#include "collectives/algorithms/adasum.h"
#include "collectives/algorithms/allreduce.h"
#include "test/ranks/run_ranks.h"
#include "test/support/elements.h"

using namespace hvd;
using namespace hvd::collectives;
using namespace hvd::test;

namespace {

std::vector<double> combine(const std::vector<double>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  double ca = aa >= 1e-8 ? 1 - ab / (2 * aa) : 1, cb = bb >= 1e-8 ? 1 - ab / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// Rank r's input: not parallel to any other rank's, not orthogonal either.
double input(int rank, std::size_t i) {
  return std::sin(0.37 * static_cast<double>(i) + rank) + 0.25 * rank;
}

std::vector<double> reference(int n, std::size_t count, DType t) {
  std::vector<std::vector<double>> level;
  for (int r = 0; r < n; ++r) {
    std::vector<double> v(count);
    std::vector<std::byte> typed(count * dtypeSize(t));
    for (std::size_t i = 0; i < count; ++i) {
      setElement(typed.data(), t, i, input(r, i));
      v[i] = getElement(typed.data(), t, i);  // what the rank really holds
    }
    level.push_back(v);
  }
  while (level.size() > 1) {
    std::vector<std::vector<double>> next;
    for (std::size_t k = 0; k < level.size(); k += 2)
      next.push_back(combine(level[k], level[k + 1]));
    level = next;
  }
  return level[0];
}

double adasumTolerance(DType t) {
  switch (t) {
    case DType::Float16:
      return 2e-3;
    case DType::BFloat16:
      return 1e-2;
    case DType::Float32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

}  // namespace

TEST_CASE("adasum matches the pairwise tree, bit-identical on every rank", "[adasum]") {
  int n = GENERATE(1, 2, 4, 8);
  Transport transport = GENERATE(Transport::Tcp, Transport::Shm);
  INFO(nameOf(transport) << ", world size " << n);
  const DType types[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  const std::size_t counts[] = {0, 1, 5, 1000, 70001};
  // Built once here, not by every rank: each reference combines all n ranks' vectors.
  std::map<std::pair<DType, std::size_t>, std::vector<double>> references;
  for (DType t : types)
    for (std::size_t count : counts) references[{t, count}] = reference(n, count, t);
  REQUIRE_NOTHROW(runRanks(
      n,
      [&](Comm& comm) {
        for (DType t : types)
          for (std::size_t count : counts)
            for (bool inPlace : {true, false}) {
              std::vector<std::byte> in(count * dtypeSize(t) + 1), out(in.size());
              for (std::size_t i = 0; i < count; ++i)
                setElement(in.data(), t, i, input(comm.rank(), i));
              void* dst = inPlace ? in.data() : out.data();
              allreduce(comm, in.data(), dst, count, t, ReduceOp::Adasum, {});
              const auto& want = references.at({t, count});
              for (std::size_t i = 0; i < count; ++i) {
                double got = getElement(dst, t, i);
                HVD_ENFORCE(std::abs(got - want[i]) <= adasumTolerance(t) * (1 + std::abs(want[i])),
                            "adasum n=", n, " ", dtypeName(t), " count=", count, " element ", i,
                            " is ", got, ", want ", want[i]);
              }
              // Rank 0's result, passed round, equals this rank's byte for byte.
              std::vector<std::byte> first(count * dtypeSize(t));
              if (comm.rank() == 0 && count) std::memcpy(first.data(), dst, first.size());
              allreduce(comm, first.data(), first.data(), first.size(), DType::UInt8, ReduceOp::Max,
                        {});
              HVD_ENFORCE(count == 0 || std::memcmp(first.data(), dst, first.size()) == 0,
                          "adasum n=", n, " ", dtypeName(t), " count=", count,
                          ": ranks ended with different bytes");
            }
      },
      over(transport)));
}

TEST_CASE("adasum averages equal vectors, adds orthogonal ones and scales", "[adasum]") {
  REQUIRE_NOTHROW(runRanks(2, [](Comm& comm) {
    std::vector<double> same{1.5, -2.0, 4.0};
    adasumAllreduce(comm, same.data(), same.data(), 3, DType::Float64);
    HVD_ENFORCE(same == (std::vector<double>{1.5, -2.0, 4.0}), "equal vectors: not their average");
    std::vector<double> axis(2, 0.0);
    axis[comm.rank()] = 3.0;
    adasumAllreduce(comm, axis.data(), axis.data(), 2, DType::Float64, 0.5, 4.0);
    HVD_ENFORCE(axis == (std::vector<double>{6.0, 6.0}),
                "orthogonal vectors: not their sum, "
                "prescaled by 0.5 and postscaled by 4: ",
                axis[0], " ", axis[1]);
    std::vector<float> zero(4, comm.rank() == 0 ? 0.0f : 2.0f);  // a joined rank's zeros
    adasumAllreduce(comm, zero.data(), zero.data(), 4, DType::Float32);
    HVD_ENFORCE(zero == std::vector<float>(4, 2.0f), "a zero vector changes nothing");
  }));
}

TEST_CASE("adasum refuses integer tensors and worlds that are not a power of two", "[adasum]") {
  CHECK_THROWS_WITH(checkAdasum(DType::Int32, 4),
                    Catch::Contains("adasum combines float16, bfloat16, float32 and float64 "
                                    "tensors, not int32"));
  CHECK_THROWS_WITH(checkAdasum(DType::Float32, 3),
                    Catch::Contains("power-of-two number of ranks (as Horovod's); this one has 3"));
  CHECK_NOTHROW(checkAdasum(DType::Float16, 8));
}
