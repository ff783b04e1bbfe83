// The hierarchical allreduce's three stages on real CUDA memory: 6 ranks as threads sharing the
// GPU, on 3 "hosts" of 2 ranks whose ranks are not contiguous (host = rank % 3). The local stage
// is host staging here, since ranks sharing a GPU cannot form an NCCL communicator; the stages'
// offsets, the in-place reduce-scatter and allgather, and the scaling are what is checked.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "collectives/gpu/cuda_api.h"
#include "collectives/gpu/hierarchical_collectives.h"
#include "collectives/gpu/staged_collectives.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;

namespace {

constexpr int kRanks = 6;
constexpr int kHosts = 3;

template <typename T>
std::vector<T> readBack(const void* p, std::size_t n) {
  std::vector<T> out(n);
  if (n)
    HVD_ENFORCE(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return out;
}

// What one case runs: every rank's element i is (rank + 1) + i % 7.
struct Case {
  ReduceOp op;
  std::size_t count;
  bool inPlace;
  double prescale = 1.0, postscale = 1.0;
};

double expected(const Case& c, std::size_t i) {
  double base = static_cast<double>(i % 7), total = 0;
  double best = c.op == ReduceOp::Min ? 1e300 : -1e300, product = 1;
  for (int r = 0; r < kRanks; ++r) {
    double x = (r + 1 + base) * c.prescale;
    total += x;
    best = c.op == ReduceOp::Min ? std::min(best, x) : std::max(best, x);
    product *= x;
  }
  double v = c.op == ReduceOp::Sum       ? total
             : c.op == ReduceOp::Average ? total / kRanks
             : c.op == ReduceOp::Product ? product
                                         : best;
  return v * c.postscale;
}

template <typename T>
std::string runCase(gpu::GpuCollectives& h, const Case& c, DType dtype, int rank,
                    cudaStream_t stream) {
  std::vector<T> host(c.count);
  for (std::size_t i = 0; i < c.count; ++i) host[i] = static_cast<T>(rank + 1 + i % 7);
  auto in = gpu::allocateOnDevice(0, std::max<std::size_t>(c.count * sizeof(T), 1));
  auto out = gpu::allocateOnDevice(0, std::max<std::size_t>(c.count * sizeof(T), 1));
  // On the stream the collective runs on: a cudaMemcpy from pageable memory may return before
  // its DMA lands, and the legacy stream does not order hvd's non-blocking one.
  if (c.count)
    HVD_ENFORCE(cudaMemcpyAsync(in.get(), host.data(), c.count * sizeof(T), cudaMemcpyHostToDevice,
                                stream) == cudaSuccess);
  Tensor input{in.get(), dtype, {static_cast<int64_t>(c.count)}};
  Tensor output{c.inPlace ? in.get() : out.get(), dtype, {static_cast<int64_t>(c.count)}};
  AllreduceOptions options{64 * 1024, 16 * 1024, c.prescale, c.postscale};
  h.allreduce(input, output, c.op, options, stream);
  h.synchronize(stream, Clock::now() + std::chrono::seconds(20), "hierarchical test");
  auto got = readBack<T>(output.data, c.count);
  for (std::size_t i = 0; i < c.count; ++i) {
    double want = expected(c, i);
    if (static_cast<double>(got[i]) != static_cast<double>(static_cast<T>(want))) {
      std::ostringstream why;
      why << "rank " << rank << " " << dtypeName(dtype) << " op " << static_cast<int>(c.op)
          << " count " << c.count << (c.inPlace ? " in place" : " out of place") << ": element "
          << i << " is " << static_cast<double>(got[i]) << ", expected " << want;
      return why.str();
    }
  }
  return "";
}

}  // namespace

TEST_CASE("hierarchical allreduce: local reduce-scatter, cross allreduce, local allgather",
          "[gpu]") {
  std::vector<std::string> problems(kRanks);
  test::runRanks(kRanks, [&](Comm& comm) {
    int me = comm.rank();
    HVD_ENFORCE(cudaSetDevice(0) == cudaSuccess);
    std::vector<int> local, cross;
    for (int r = 0; r < kRanks; ++r) {
      if (r % kHosts == me % kHosts) local.push_back(r);
      if (r / kHosts == me / kHosts) cross.push_back(r);  // same index within its host
    }
    auto localComm = comm.subset(local);
    auto crossComm = comm.subset(cross);
    auto localStaged = std::make_unique<gpu::StagedCollectives>(*localComm, 0);
    gpu::HierarchicalCollectives h(std::move(localComm), std::move(crossComm),
                                   std::move(localStaged),
                                   std::make_unique<gpu::StagedCollectives>(comm, 0), 0, kRanks);
    gpu::Stream stream(0);
    std::string& p = problems[me];
    // Sizes: nothing, fewer elements than local ranks, uneven parts, several ring segments.
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1001}, std::size_t{300001}}) {
      for (bool inPlace : {true, false}) {
        if (p.empty())
          p = runCase<float>(h, {ReduceOp::Sum, count, inPlace}, DType::Float32, me, stream.get());
        if (p.empty())
          p = runCase<float>(h, {ReduceOp::Average, count, inPlace, 2.0, 0.5}, DType::Float32, me,
                             stream.get());
        if (p.empty())
          p = runCase<int32_t>(h, {ReduceOp::Sum, count, inPlace, 3.0}, DType::Int32, me,
                               stream.get());
      }
    }
    if (p.empty())
      p = runCase<int32_t>(h, {ReduceOp::Average, 1001, false}, DType::Int32, me, stream.get());
    // Min, Max and Product run flat.
    if (p.empty())
      p = runCase<int32_t>(h, {ReduceOp::Max, 1001, true}, DType::Int32, me, stream.get());
    if (p.empty())
      p = runCase<double>(h, {ReduceOp::Product, 17, true}, DType::Float64, me, stream.get());
    if (p.empty())
      p = runCase<int64_t>(h, {ReduceOp::Min, 5000, false, 3.0, 1.0}, DType::Int64, me,
                           stream.get());
    // Other operations run flat, over all six ranks.
    auto b = gpu::allocateOnDevice(0, 4 * sizeof(float));
    std::vector<float> mine(4, 1.0f * me);
    HVD_ENFORCE(cudaMemcpyAsync(b.get(), mine.data(), sizeof(float) * 4, cudaMemcpyHostToDevice,
                                stream.get()) == cudaSuccess);
    h.broadcast({b.get(), DType::Float32, {4}}, 4, stream.get());
    h.synchronize(stream.get(), Clock::now() + std::chrono::seconds(20), "broadcast");
    if (p.empty() && readBack<float>(b.get(), 4) != std::vector<float>(4, 4.0f))
      p = "rank " + std::to_string(me) + ": broadcast from rank 4";
  });
  for (int r = 0; r < kRanks; ++r) CHECK(problems[r] == "");
}
