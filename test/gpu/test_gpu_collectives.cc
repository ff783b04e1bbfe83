// GPU tensors through the engine: kernels, NCCL with one rank, host staging with several ranks
// sharing one GPU (NCCL refuses that, so the engine falls back), and the errors.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "collectives/algorithms/reduce.h"
#include "collectives/gpu/kernels.h"
#include "test/ranks/run_runtimes.h"
#include "test/support/elements.h"

using namespace hvd;
using namespace hvd::runtime;
using collectives::DType;
using collectives::ReduceOp;
using collectives::Tensor;

namespace {

// Device memory holding a copy of `host`.
template <typename T>
struct DeviceVector {
  explicit DeviceVector(const std::vector<T>& host) : n(host.size()) {
    void* p = nullptr;
    HVD_ENFORCE(cudaMalloc(&p, std::max<std::size_t>(n * sizeof(T), 1)) == cudaSuccess);
    ptr = static_cast<T*>(p);
    if (n) cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceVector() { cudaFree(ptr); }
  std::vector<T> read() const { return readDevice<T>(ptr, n); }
  template <typename U>
  static std::vector<U> readDevice(const void* p, std::size_t count) {
    std::vector<U> out(count);
    if (count)
      HVD_ENFORCE(cudaMemcpy(out.data(), p, count * sizeof(U), cudaMemcpyDeviceToHost) ==
                  cudaSuccess);
    return out;
  }
  T* ptr = nullptr;
  std::size_t n;
};

Operation gpuOp(OpType type, const std::string& name, void* data, DType dtype,
                std::vector<int64_t> shape) {
  Operation op;
  op.type = type;
  op.name = name;
  op.inputs = {{data, dtype, std::move(shape)}};
  op.device = DeviceId{0};
  return op;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x.empty() ? "" : x + "\n";
  return s;
}

}  // namespace

TEST_CASE("batched copy moves every job, aligned or not, across launches", "[gpu]") {
  // 300 jobs: more than one launch carries; sizes around the 16-byte word and the block slice.
  std::vector<std::size_t> sizes = {0, 1, 15, 16, 17, 4099, 65536, 65537, 200003};
  std::vector<collectives::gpu::CopyJob> jobs;
  std::size_t total = 0;
  for (int i = 0; i < 300; ++i) total += sizes[i % sizes.size()] + 3;
  std::vector<uint8_t> src(total);
  for (std::size_t i = 0; i < total; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  DeviceVector<uint8_t> from(src), to(std::vector<uint8_t>(total + 5, 0));
  std::size_t offset = 0;
  for (int i = 0; i < 300; ++i) {
    std::size_t b = sizes[i % sizes.size()];
    std::size_t skew = i % 3;  // misaligned starts
    jobs.push_back({from.ptr + offset + skew, to.ptr + offset + skew + (i % 2), b});
    offset += b + 3;
  }
  // Each job writes [offset+skew+odd, +b): ranges overlap for odd i; keep even jobs only.
  std::vector<collectives::gpu::CopyJob> even;
  for (std::size_t i = 0; i < jobs.size(); i += 2) even.push_back(jobs[i]);
  collectives::gpu::batchedCopy(even, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  auto out = to.read();
  offset = 0;
  std::size_t wrong = 0;
  for (int i = 0; i < 300; ++i) {
    std::size_t b = sizes[i % sizes.size()], skew = i % 3;
    if (i % 2 == 0)
      for (std::size_t k = 0; k < b; ++k) wrong += out[offset + skew + k] != src[offset + skew + k];
    offset += b + 3;
  }
  REQUIRE(wrong == 0);
}

TEST_CASE("device scale and divide round as the host versions do", "[gpu]") {
  for (DType dtype :
       {DType::UInt8, DType::Int8, DType::UInt16, DType::Int16, DType::Int32, DType::Int64,
        DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    std::size_t n = 1000, bytes = n * collectives::dtypeSize(dtype);
    std::vector<uint8_t> host(bytes);
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 97) - 20.0f;
    // Small integers, exact in every dtype (float16 and bfloat16 included).
    bool isUnsigned = dtype == DType::UInt8 || dtype == DType::UInt16;
    for (std::size_t i = 0; i < n; ++i)
      test::setElement(host.data(), dtype, i, isUnsigned ? std::fabs(values[i]) : values[i]);
    DeviceVector<uint8_t> dev(host);
    collectives::gpu::scaleOnDevice(dev.ptr, n, dtype, 0.37, nullptr);
    collectives::gpu::divideOnDevice(dev.ptr, n, dtype, 3, nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    collectives::scale(host.data(), n, dtype, 0.37);
    collectives::divide(host.data(), n, dtype, 3);
    INFO(collectives::dtypeName(dtype));
    REQUIRE(dev.read() == host);
  }
}

// Collects what went wrong on a rank (Catch2's assertions are not thread-safe).
struct Problems {
  std::ostringstream out;
  void expect(bool ok, const std::string& what) {
    if (!ok) out << what << "; ";
  }
  std::string text() const { return out.str(); }
};

TEST_CASE("one rank's GPU operations run through NCCL, fused, with NCCL phases in the timeline",
          "[gpu]") {
  const std::string timeline = "gpu_test_timeline.json";
  std::remove(timeline.c_str());
  auto outcome = test::runRuntimes(
      1,
      [&](Runtime& rt, int) -> std::string {
        Problems p;
        auto wait = [](Handle h) -> OpResult& { return h->wait(std::chrono::seconds(20)); };
        rt.engine().startTimeline(timeline, false);
        std::vector<float> v(1000);
        std::iota(v.begin(), v.end(), 1.0f);
        DeviceVector<float> in(v), out(std::vector<float>(1000, -1.0f));
        Operation op = gpuOp(OpType::Allreduce, "scaled", in.ptr, DType::Float32, {1000});
        op.outputs = {{out.ptr, DType::Float32, {1000}}};
        op.prescale = 2.0;
        op.postscale = 0.25;
        wait(rt.engine().enqueue(op));
        auto r = out.read();
        for (std::size_t i = 0; i < v.size(); ++i)
          p.expect(r[i] == v[i] * 0.5f, "scaled allreduce");
        // A grouped allreduce of 20 small tensors goes through the device fusion buffer.
        std::vector<std::unique_ptr<DeviceVector<float>>> small;
        Operation grouped;
        grouped.type = OpType::Allreduce;
        grouped.name = "grouped";
        grouped.reduceOp = ReduceOp::Average;
        grouped.device = DeviceId{0};
        for (int i = 0; i < 20; ++i) {
          small.push_back(
              std::make_unique<DeviceVector<float>>(std::vector<float>(17 + i, 1.0f * i)));
          grouped.inputs.push_back({small.back()->ptr, DType::Float32, {17 + i}});
        }
        wait(rt.engine().enqueue(grouped));
        for (int i = 0; i < 20; ++i)
          p.expect(small[i]->read() == std::vector<float>(17 + i, 1.0f * i),
                   "fused tensor " + std::to_string(i));
        p.expect(rt.engine().stats().fusedTensors >= 20, "the 20 tensors were not fused");
        // int16 has no NCCL type: its reduction is staged through host memory.
        std::vector<int16_t> s16 = {-3, 7, 1000};
        DeviceVector<int16_t> d16(s16);
        Operation op16 = gpuOp(OpType::Allreduce, "int16", d16.ptr, DType::Int16, {3});
        op16.reduceOp = ReduceOp::Max;
        wait(rt.engine().enqueue(op16));
        p.expect(d16.read() == s16, "int16 allreduce");
        // uint16 neither: staged too, and compared as unsigned (65000 would be negative as int16).
        std::vector<uint16_t> u16 = {65000, 7, 3};
        DeviceVector<uint16_t> du16(u16);
        Operation opU16 = gpuOp(OpType::Allreduce, "uint16", du16.ptr, DType::UInt16, {3});
        opU16.reduceOp = ReduceOp::Max;
        wait(rt.engine().enqueue(opU16));
        p.expect(du16.read() == u16, "uint16 allreduce");
        // Allgather returns device memory the result owns.
        Handle gHandle = rt.engine().enqueue(
            gpuOp(OpType::Allgather, "gather", in.ptr, DType::Float32, {10, 100}));
        OpResult& g = wait(gHandle);
        p.expect(g.outputs.size() == 1 && g.outputs[0].shape == std::vector<int64_t>{10, 100},
                 "allgather shape");
        p.expect(g.owned.size() == 1 && g.owned[0].device.index == 0, "allgather output on cuda:0");
        p.expect(DeviceVector<float>::readDevice<float>(g.outputs[0].data, 1000) == v,
                 "allgather values");
        Handle rsHandle = rt.engine().enqueue(
            gpuOp(OpType::Reducescatter, "scatter", in.ptr, DType::Float32, {10, 100}));
        OpResult& rs = wait(rsHandle);
        p.expect(DeviceVector<float>::readDevice<float>(rs.outputs[0].data, 1000) == v,
                 "reducescatter");
        Handle a2aHandle =
            rt.engine().enqueue(gpuOp(OpType::Alltoall, "a2a", in.ptr, DType::Float32, {10, 100}));
        OpResult& a2a = wait(a2aHandle);
        p.expect(DeviceVector<float>::readDevice<float>(a2a.outputs[0].data, 1000) == v,
                 "alltoall");
        rt.engine().stopTimeline();
        return p.text();
      },
      {{"HVD_FUSION_THRESHOLD", "67108864"}});
  REQUIRE(join(outcome) == "");
  std::ifstream f(timeline);
  std::stringstream text;
  text << f.rdbuf();
  CHECK(text.str().find("NCCL_ALLREDUCE") != std::string::npos);
  CHECK(text.str().find("NCCL_ALLREDUCE (fused)") != std::string::npos);
  CHECK(text.str().find("MEMCPY_IN_FUSION_BUFFER") != std::string::npos);
  CHECK(text.str().find("STAGED_ALLREDUCE") != std::string::npos);  // the int16 one
  CHECK(text.str().find("NCCL_ALLGATHER") != std::string::npos);
}

TEST_CASE("ranks sharing one GPU fall back to host staging for every collective", "[gpu]") {
  const int n = 3;
  auto outcome = test::runRuntimes(n, [&](Runtime& rt, int rank) -> std::string {
    Problems p;
    auto wait = [](Handle h) -> OpResult& { return h->wait(std::chrono::seconds(20)); };
    auto read = [](const Tensor& t) {
      return DeviceVector<float>::readDevice<float>(t.data, t.numElements());
    };
    // allreduce: sum of rank + i.
    std::vector<float> v(5000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = rank + 0.5f * i;
    DeviceVector<float> a(v);
    wait(rt.engine().enqueue(gpuOp(OpType::Allreduce, "sum", a.ptr, DType::Float32, {5000})));
    auto sum = a.read();
    for (std::size_t i = 0; i < v.size(); ++i) p.expect(sum[i] == 3.0f + 1.5f * i, "allreduce");
    // broadcast from rank 2
    DeviceVector<float> b(std::vector<float>(7, 10.0f * rank));
    Operation bop = gpuOp(OpType::Broadcast, "bcast", b.ptr, DType::Float32, {7});
    bop.root = 2;
    wait(rt.engine().enqueue(bop));
    p.expect(b.read() == std::vector<float>(7, 20.0f), "broadcast");
    // allgather with rank + 1 rows of 3
    DeviceVector<float> g(std::vector<float>(3 * (rank + 1), 1.0f * rank));
    Handle grHandle = rt.engine().enqueue(
        gpuOp(OpType::Allgather, "gather", g.ptr, DType::Float32, {rank + 1, 3}));
    OpResult& gr = wait(grHandle);
    std::vector<float> expectG;
    for (int r = 0; r < n; ++r) expectG.insert(expectG.end(), 3 * (r + 1), 1.0f * r);
    p.expect(gr.outputs[0].shape == std::vector<int64_t>{6, 3} && read(gr.outputs[0]) == expectG,
             "allgather");
    // alltoall: j + 1 rows of 2 to rank j, valued 10 * sender + receiver
    std::vector<float> send;
    std::vector<int64_t> splits;
    for (int j = 0; j < n; ++j) {
      splits.push_back(j + 1);
      send.insert(send.end(), 2 * (j + 1), 10.0f * rank + j);
    }
    DeviceVector<float> s(send);
    Operation aop = gpuOp(OpType::Alltoall, "a2a", s.ptr, DType::Float32, {6, 2});
    aop.splits = splits;
    Handle arHandle = rt.engine().enqueue(aop);
    OpResult& ar = wait(arHandle);
    std::vector<float> expectA;
    for (int r = 0; r < n; ++r) expectA.insert(expectA.end(), 2 * (rank + 1), 10.0f * r + rank);
    p.expect(read(ar.outputs[0]) == expectA, "alltoall");
    p.expect(ar.receivedSplits[0] == std::vector<int64_t>(n, rank + 1), "alltoall splits");
    // reducescatter of 7 rows of 2: parts of 3, 2 and 2 rows
    std::vector<float> rsIn(14);
    for (std::size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = 1.0f * i + rank;
    DeviceVector<float> rsd(rsIn);
    Operation rop = gpuOp(OpType::Reducescatter, "rs", rsd.ptr, DType::Float32, {7, 2});
    Handle rrHandle = rt.engine().enqueue(rop);
    OpResult& rr = wait(rrHandle);
    int first = rank == 0 ? 0 : (rank == 1 ? 3 : 5), rows = rank == 0 ? 3 : 2;
    std::vector<float> expectR;
    for (int i = 2 * first; i < 2 * (first + rows); ++i) expectR.push_back(3.0f * i + 3.0f);
    p.expect(read(rr.outputs[0]) == expectR, "reducescatter");
    return p.text();
  });
  REQUIRE(join(outcome) == "");
}

TEST_CASE("a tensor on a device this process does not see is refused by name", "[gpu]") {
  auto outcome = test::runRuntimes(1, [&](Runtime& rt, int) -> std::string {
    float x = 0;
    Operation op = gpuOp(OpType::Allreduce, "far", &x, DType::Float32, {1});
    op.device = DeviceId{64};
    return test::errorOf([&] { rt.engine().enqueue(op); });
  });
  REQUIRE(outcome[0].find("allreduce \"far\": tensor on cuda:64") != std::string::npos);
  REQUIRE(outcome[0].find("CUDA device(s)") != std::string::npos);
}
