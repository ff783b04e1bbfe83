// The GPU half of a CUDA build (see gpu_executor.h).
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <set>

#include "collectives/gpu/gpu_backend.h"
#include "common/error.h"
#include "common/format.h"
#include "common/logging.h"
#include "runtime/engine/executor.h"
#include "runtime/engine/fusion.h"
#include "runtime/engine/gpu_executor.h"
#include "runtime/engine/host_layout.h"

namespace hvd::runtime {
namespace {

namespace gpu = collectives::gpu;
using collectives::Tensor;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kFusionAlign = 16;  // keeps the batched copy on 16-byte words

// Timeline phase names say which backend ran: NCCL_ALLREDUCE, HIERARCHICAL_ALLREDUCE,
// STAGED_ALLGATHER, ...
std::string phaseName(const gpu::GpuCollectives& backend, const std::string& op) {
  std::string name = backend.name();
  if (name == "hierarchical")  // only allreduce is hierarchical; the rest is flat NCCL
    return (op.rfind("ALLREDUCE", 0) == 0 ? "HIERARCHICAL_" : "NCCL_") + op;
  return (name == "nccl" ? "NCCL_" : "STAGED_") + op;
}

// CUDA devices this process sees; 0 when the driver reports none (or an error).
int visibleDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  return count;
}

std::size_t aligned(std::size_t bytes) {
  return (bytes + kFusionAlign - 1) / kFusionAlign * kFusionAlign;
}

// What each rank says about itself when a communicator's first GPU operation picks a backend.
struct GpuIdentity {
  char host[64] = {};
  char pciBus[32] = {};
  uint8_t wantsNccl = 0;
};

class CudaExecutor : public GpuExecutor {
 public:
  CudaExecutor(ExecutorOptions options, Timeline& timeline)
      : options_(std::move(options)), timeline_(timeline) {}

  void run(const Response& response, const std::vector<LocalOp*>& ops, collectives::Comm& comm,
           DeviceId device, ExecutorCounters& counters) override;
  void forget(const collectives::Comm* comm) override;

 private:
  struct Backends {
    std::unique_ptr<gpu::GpuCollectives> nccl;  // null: host staging only
    std::unique_ptr<gpu::StagedCollectives> staged;
  };
  struct DeviceState {
    std::unique_ptr<gpu::Stream> stream;
    std::unique_ptr<gpu::DeviceBuffer> fusion;
  };

  DeviceState& deviceState(int device);
  std::unique_ptr<gpu::GpuCollectives> nccl(collectives::Comm& comm, int device);
  // NCCL within each host and TCP across hosts for allreduce, flat NCCL for the rest; null
  // (after saying why) when there is one host or the hosts have different numbers of ranks.
  std::unique_ptr<gpu::GpuCollectives> hierarchical(collectives::Comm& comm, int device,
                                                    const std::vector<GpuIdentity>& identities);
  Backends& backends(collectives::Comm& comm, int device);
  gpu::GpuCollectives& backendFor(Backends& b, DType dtype, bool reduces) {
    if (b.nccl && (!reduces || collectives::nccl::reducible(dtype))) return *b.nccl;
    return *b.staged;
  }
  void allreduce(const Response& response, const std::vector<LocalOp*>& ops, Backends& backends,
                 DeviceState& state, int device, ExecutorCounters& counters);
  void allreduceChunk(const std::vector<AllreduceSlot>& slots,
                      const std::vector<std::size_t>& chunk, const OpRequest& params,
                      Backends& backends, DeviceState& state, ExecutorCounters& counters);
  void runOne(LocalOp& op, Backends& backends, cudaStream_t stream, int device);
  // Marks a phase in the timeline; when it is on, waits for the phase's GPU work first, so the
  // phases show what the GPU spent (the timeline costs that overlap).
  void phase(const std::vector<AllreduceSlot>& slots, const std::vector<std::size_t>& chunk,
             const std::string& name, Clock::time_point begin, gpu::GpuCollectives& backend,
             cudaStream_t stream);

  ExecutorOptions options_;
  Timeline& timeline_;
  std::map<int, DeviceState> devices_;
  std::map<std::pair<const collectives::Comm*, int>, Backends> backends_;
  std::vector<std::shared_ptr<std::byte>> joinedZeros_;  // outlive the operation's GPU work
};

CudaExecutor::DeviceState& CudaExecutor::deviceState(int device) {
  DeviceState& s = devices_[device];
  if (!s.stream) {
    s.stream = std::make_unique<gpu::Stream>(device);
    s.fusion = std::make_unique<gpu::DeviceBuffer>(device);
  }
  return s;
}

CudaExecutor::Backends& CudaExecutor::backends(collectives::Comm& comm, int device) {
  auto key = std::make_pair(static_cast<const collectives::Comm*>(&comm), device);
  auto it = backends_.find(key);
  if (it != backends_.end()) return it->second;
  // Every rank runs this at the same point of the same operation, so they all see the same
  // identities and choose alike.
  GpuIdentity mine;
  std::strncpy(mine.host, options_.hostname.c_str(), sizeof mine.host - 1);
  std::string bus = gpu::pciBusId(device);
  std::strncpy(mine.pciBus, bus.c_str(), sizeof mine.pciBus - 1);
  mine.wantsNccl = options_.gpuUseNccl ? 1 : 0;
  std::vector<GpuIdentity> all(comm.size());
  Tensor in{&mine, collectives::DType::UInt8, {static_cast<int64_t>(sizeof mine)}};
  collectives::allgather(comm, in,
                         [&](const std::vector<int64_t>&) -> void* { return all.data(); });
  std::string reason;
  std::set<std::pair<std::string, std::string>> seen;
  for (int r = 0; r < comm.size() && reason.empty(); ++r) {
    if (!all[r].wantsNccl)
      reason = detail::concat("rank ", r, " has HVD_GPU_BACKEND=staged");
    else if (!seen.insert({all[r].host, all[r].pciBus}).second)
      reason = detail::concat("several ranks share GPU ", all[r].pciBus, " on host ", all[r].host,
                              ", which NCCL refuses; give each rank a GPU of its own (e.g. "
                              "torch.cuda.set_device(hvd.local_rank()))");
  }
  Backends b;
  b.staged = std::make_unique<gpu::StagedCollectives>(comm, device);
  if (reason.empty()) {
    b.nccl = options_.gpuHierarchicalAllreduce ? hierarchical(comm, device, all) : nullptr;
    if (!b.nccl) b.nccl = nccl(comm, device);
  } else if (comm.rank() == 0) {
    log::logger(options_.logs.get(), "nccl")
        ->warn("GPU tensors travel through host memory (host staging), not NCCL: {}", reason);
  }
  return backends_.emplace(key, std::move(b)).first->second;
}

std::unique_ptr<gpu::GpuCollectives> CudaExecutor::nccl(collectives::Comm& comm, int device) {
  return std::make_unique<collectives::nccl::NcclCollectives>(
      comm, device, options_.opTimeout, options_.hostname, options_.logs.get());
}

std::unique_ptr<gpu::GpuCollectives> CudaExecutor::hierarchical(
    collectives::Comm& comm, int device, const std::vector<GpuIdentity>& identities) {
  std::vector<std::string> hostOfRank;
  for (const auto& identity : identities) hostOfRank.emplace_back(identity.host);
  HostLayout layout = HostLayout::of(hostOfRank);
  auto logger = log::logger(options_.logs.get(), "nccl");
  if (layout.hosts.size() == 1 || !layout.even()) {
    if (comm.rank() == 0) {
      if (layout.hosts.size() == 1)
        logger->info(
            "HVD_HIERARCHICAL_ALLREDUCE: all {} ranks are on host {}; the flat NCCL "
            "allreduce is already within one host",
            comm.size(), layout.hosts[0]);
      else
        logger->warn(
            "HVD_HIERARCHICAL_ALLREDUCE needs as many ranks on every host (ranks per "
            "host: {}); allreduce runs flat through NCCL",
            layout.text());
    }
    return nullptr;
  }
  const std::vector<int>& mine = layout.localRanks(comm.rank());
  auto localComm = comm.subset(mine);
  auto crossComm = comm.subset(layout.crossRanks(comm.rank()));
  auto local = nccl(*localComm, device);
  if (comm.rank() == 0)
    logger->info(
        "hierarchical allreduce: NCCL within each of {} hosts of {} rank(s), host "
        "memory and TCP across them",
        layout.hosts.size(), mine.size());
  return std::make_unique<gpu::HierarchicalCollectives>(std::move(localComm), std::move(crossComm),
                                                        std::move(local), nccl(comm, device),
                                                        device, comm.size());
}

void CudaExecutor::forget(const collectives::Comm* comm) {
  for (auto it = backends_.begin(); it != backends_.end();)
    it = it->first.first == comm ? backends_.erase(it) : std::next(it);
}

void CudaExecutor::run(const Response& response, const std::vector<LocalOp*>& ops,
                       collectives::Comm& comm, DeviceId device, ExecutorCounters& counters) {
  gpu::DeviceGuard guard(device.index);
  DeviceState& state = deviceState(device.index);
  cudaStream_t stream = state.stream->get();
  for (LocalOp* op : ops)
    if (op && op->ready)
      HVD_CUDA_CHECK(
          cudaStreamWaitEvent(stream, static_cast<gpu::Event*>(op->ready.get())->get(), 0),
          op->request.describe());
  Backends& b = backends(comm, device.index);
  if (response.type == OpType::Allreduce) {
    allreduce(response, ops, b, state, device.index, counters);
  } else {
    for (LocalOp* op : ops) {
      HVD_ENFORCE(op != nullptr, "only allreduce runs with joined ranks");
      ++counters.collectives;
      runOne(*op, b, stream, device.index);
    }
  }
  std::string what = ops.size() == 1 && ops[0] ? ops[0]->request.describe()
                                               : detail::concat(opTypeName(response.type), " of ",
                                                                ops.size(), " operations");
  backendFor(b, DType::Float32, false).synchronize(stream, Clock::now() + options_.opTimeout, what);
  joinedZeros_.clear();
}

void CudaExecutor::allreduce(const Response& response, const std::vector<LocalOp*>& ops,
                             Backends& backends, DeviceState& state, int device,
                             ExecutorCounters& counters) {
  auto [slots, params] = allreduceSlots(response, ops, [&](const TensorMeta& meta) -> void* {
    auto zeros = gpu::allocateOnDevice(device, meta.bytes());
    HVD_CUDA_CHECK(cudaMemsetAsync(zeros.get(), 0, meta.bytes(), state.stream->get()),
                   "join: zeros for an allreduce");
    return joinedZeros_.emplace_back(std::move(zeros)).get();
  });
  std::vector<TensorMeta> metas;
  for (const auto& s : slots) metas.push_back(s.meta);
  for (const auto& chunk : planFusion(metas, response.fusionThresholdBytes))
    allreduceChunk(slots, chunk, *params, backends, state, counters);
}

void CudaExecutor::phase(const std::vector<AllreduceSlot>& slots,
                         const std::vector<std::size_t>& chunk, const std::string& name,
                         Clock::time_point begin, gpu::GpuCollectives& backend,
                         cudaStream_t stream) {
  if (!timeline_.active()) return;
  backend.synchronize(stream, Clock::now() + options_.opTimeout, name);
  auto end = Clock::now();
  std::vector<Timeline::Event> events;
  for (auto i : chunk)
    events.push_back(
        {timelineRow(OpType::Allreduce, slots[i].name), name, begin, end, slots[i].meta.bytes()});
  timeline_.record(events);
}

void CudaExecutor::allreduceChunk(const std::vector<AllreduceSlot>& slots,
                                  const std::vector<std::size_t>& chunk, const OpRequest& params,
                                  Backends& backends, DeviceState& state,
                                  ExecutorCounters& counters) {
  collectives::AllreduceOptions options{
      options_.segmentBytes, options_.ringThresholdBytes, params.prescale,
      params.postscale,      options_.allreduceAlgorithm, options_.networkModel.get()};
  cudaStream_t stream = state.stream->get();
  DType dtype = slots[chunk[0]].meta.dtype;
  gpu::GpuCollectives& backend = backendFor(backends, dtype, true);
  std::string collective = phaseName(backend, chunk.size() > 1 ? "ALLREDUCE (fused)" : "ALLREDUCE");
  ++counters.collectives;
  auto t0 = Clock::now();
  if (chunk.size() == 1) {
    const AllreduceSlot& s = slots[chunk[0]];
    Tensor in{const_cast<void*>(s.input), s.meta.dtype, s.meta.shape};
    Tensor out{s.output, s.meta.dtype, s.meta.shape};
    backend.allreduce(in, out, params.reduceOp, options, stream);
    phase(slots, chunk, collective, t0, backend, stream);
    return;
  }
  std::size_t total = 0;
  for (auto i : chunk) total += aligned(slots[i].meta.bytes());
  std::byte* fused = state.fusion->reserve(total);
  std::vector<gpu::CopyJob> in, out;
  std::size_t offset = 0;
  for (auto i : chunk) {
    in.push_back({slots[i].input, fused + offset, slots[i].meta.bytes()});
    out.push_back({fused + offset, slots[i].output, slots[i].meta.bytes()});
    offset += aligned(slots[i].meta.bytes());
  }
  gpu::batchedCopy(in, stream);
  phase(slots, chunk, "MEMCPY_IN_FUSION_BUFFER", t0, backend, stream);
  auto t1 = Clock::now();
  // The padding between tensors is reduced too (whole elements: kFusionAlign is a multiple of
  // every dtype's size) and never copied out.
  Tensor whole{fused, dtype, {static_cast<int64_t>(total / collectives::dtypeSize(dtype))}};
  backend.allreduce(whole, whole, params.reduceOp, options, stream);
  phase(slots, chunk, collective, t1, backend, stream);
  auto t2 = Clock::now();
  gpu::batchedCopy(out, stream);
  phase(slots, chunk, "MEMCPY_OUT_FUSION_BUFFER", t2, backend, stream);
  counters.fusedTensors += chunk.size();
}

void CudaExecutor::runOne(LocalOp& op, Backends& backends, cudaStream_t stream, int device) {
  auto t0 = Clock::now();
  auto& inputs = op.op.inputs;
  // Each output in its own tensor's dtype: a grouped operation's tensors may differ.
  auto allocatorFor = [&op, device](std::size_t index) -> collectives::Allocate {
    if (op.op.allocate) return op.op.allocate;
    return [&op, device, index](const std::vector<int64_t>& shape) -> void* {
      TensorMeta meta{op.request.tensors.at(index).dtype, shape};
      auto memory = gpu::allocateOnDevice(device, meta.bytes());
      void* p = memory.get();
      op.result.owned.push_back({std::move(memory), meta.bytes(), DeviceId{device}});
      return p;
    };
  };
  bool reduces = op.op.type == OpType::Reducescatter;
  gpu::GpuCollectives& backend = backendFor(backends, op.request.tensors[0].dtype, reduces);
  switch (op.op.type) {
    case OpType::Broadcast:
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = op.op.outputs.empty() ? inputs[i] : op.op.outputs[i];
        if (t.data != inputs[i].data && t.bytes() > 0)
          HVD_CUDA_CHECK(
              cudaMemcpyAsync(t.data, inputs[i].data, t.bytes(), cudaMemcpyDeviceToDevice, stream),
              op.request.describe());
        backend.broadcast(t, op.op.root, stream);
      }
      break;
    case OpType::Allgather:
      for (std::size_t i = 0; i < inputs.size(); ++i)
        op.result.outputs.push_back(backend.allgather(inputs[i], allocatorFor(i), stream));
      break;
    case OpType::Reducescatter:
      // NCCL reduces some dtypes only: each tensor goes to the backend for its own.
      for (std::size_t i = 0; i < inputs.size(); ++i)
        op.result.outputs.push_back(
            backendFor(backends, inputs[i].dtype, true)
                .reducescatter(inputs[i], op.op.reduceOp, allocatorFor(i), stream));
      break;
    case OpType::Alltoall: {
      auto r = backend.alltoall(inputs[0], op.op.splits, allocatorFor(0), stream);
      op.result.outputs.push_back(r.output);
      op.result.receivedSplits.push_back(r.receivedSplits);
      break;
    }
    default:
      throw InternalError(detail::concat("GPU executor cannot run ", opTypeName(op.op.type)));
  }
  if (timeline_.active()) {
    backend.synchronize(stream, Clock::now() + options_.opTimeout, op.request.describe());
    timeline_.record(
        {{timelineRow(op.op.type, op.request.name), phaseName(backend, timelinePhase(op.op.type)),
          t0, Clock::now(), op.request.totalBytes()}});
  }
}

}  // namespace

std::shared_ptr<void> markReady(DeviceId device, void* stream, const std::string& what) {
  int count = visibleDevices();
  if (device.index < 0 || device.index >= count)
    throw InvalidArgument(detail::concat(what, ": tensor on ", device.describe(),
                                         ", but this "
                                         "process sees ",
                                         count, " CUDA device(s)"));
  gpu::DeviceGuard guard(device.index);
  auto event = std::make_shared<gpu::Event>(device.index);
  event->record(static_cast<cudaStream_t>(stream));
  return event;
}

std::unique_ptr<GpuExecutor> makeGpuExecutor(const ExecutorOptions& options, Timeline& timeline) {
  return std::make_unique<CudaExecutor>(options, timeline);
}

}  // namespace hvd::runtime
