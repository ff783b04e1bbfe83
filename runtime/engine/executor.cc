#include "runtime/engine/executor.h"

#include <algorithm>
#include <cstring>

#include "collectives/algorithms/barrier.h"
#include "collectives/transport/request.h"
#include "common/error.h"

namespace hvd::runtime {

using collectives::Tensor;
using Clock = std::chrono::steady_clock;

void Executor::run(const Response& response, const std::vector<LocalOp*>& ops,
                   collectives::Comm& comm) {
  // Every operation of a response is on one device (the fusion key includes it).
  DeviceId device;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] || i < response.forJoined.size()) {
      device = ops[i] ? ops[i]->request.device : response.forJoined[i].device;
      break;
    }
  }
  if (!device.isCpu()) {
    if (!gpu_) gpu_ = makeGpuExecutor(options_, timeline_);
    return gpu_->run(response, ops, comm, device, counters_);
  }
  if (response.type == OpType::Allreduce) return allreduce(response, ops, comm);
  for (LocalOp* op : ops) {
    HVD_ENFORCE(op != nullptr, "only allreduce runs with joined ranks");
    runOne(*op, comm);
  }
}

AllreduceSlots allreduceSlots(const Response& response, const std::vector<LocalOp*>& ops,
                              const std::function<void*(const TensorMeta&)>& zeros) {
  AllreduceSlots all;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (LocalOp* op = ops[i]) {
      all.params = &op->request;
      for (std::size_t t = 0; t < op->op.inputs.size(); ++t) {
        const Tensor& in = op->op.inputs[t];
        void* out = op->op.outputs.empty() ? in.data : op->op.outputs[t].data;
        all.slots.push_back({in.data, out, op->request.tensors[t], op->request.name});
      }
    } else {
      // This rank joined: it adds zeros of the same shape and discards the result.
      const OpRequest& shape = response.forJoined.at(i);
      all.params = &shape;
      for (const auto& meta : shape.tensors) {
        void* z = zeros(meta);
        all.slots.push_back({z, z, meta, shape.name});
      }
    }
  }
  HVD_ENFORCE(all.params != nullptr, "allreduce response without operations");
  return all;
}

void Executor::allreduce(const Response& response, const std::vector<LocalOp*>& ops,
                         collectives::Comm& comm) {
  std::vector<std::vector<std::byte>> joinedZeros;  // outlives the chunks below
  auto [slots, params] = allreduceSlots(response, ops, [&](const TensorMeta& meta) -> void* {
    return joinedZeros.emplace_back(meta.bytes()).data();
  });
  std::vector<TensorMeta> metas;
  for (const auto& s : slots) metas.push_back(s.meta);
  // Adasum combines each tensor by its own dot products, so a grouped one is not fused.
  std::size_t threshold = params->reduceOp == ReduceOp::Adasum ? 0 : response.fusionThresholdBytes;
  for (const auto& chunk : planFusion(metas, threshold))
    allreduceChunk(slots, chunk, *params, comm);
}

std::size_t Executor::fusionPieceBytes(std::size_t totalBytes, std::size_t elementBytes,
                                       const collectives::Comm& comm) const {
  if (!options_.fuseInPieces) return totalBytes;
  // Blocks of kLatencyBoundBytes keep every message of the piece's allreduce on the transports'
  // polling path, and the piece with the tensors it is copied from and to within the core's
  // cache; a whole 2.5 MiB buffer does neither (docs/performance.md, "Fusion in pieces").
  std::size_t piece = static_cast<std::size_t>(comm.size()) * collectives::kLatencyBoundBytes;
  return std::max(elementBytes, piece / elementBytes * elementBytes);
}

void Executor::allreduceChunk(const std::vector<AllreduceSlot>& slots,
                              const std::vector<std::size_t>& chunk, const OpRequest& params,
                              collectives::Comm& comm) {
  collectives::AllreduceOptions options{
      options_.segmentBytes, options_.ringThresholdBytes, params.prescale,
      params.postscale,      options_.allreduceAlgorithm, options_.networkModel.get()};
  std::vector<Timeline::Event> events;
  bool timeline = timeline_.active();
  // Marks a phase for the chunk's tensors at positions [first, last).
  auto mark = [&](const char* phase, std::size_t first, std::size_t last, Clock::time_point begin,
                  Clock::time_point end) {
    if (!timeline) return;
    for (std::size_t k = first; k < last; ++k) {
      const AllreduceSlot& s = slots[chunk[k]];
      events.push_back({timelineRow(OpType::Allreduce, s.name), phase, begin, end, s.meta.bytes()});
    }
  };
  // The timeline names the algorithm when the communicator allreduces `bytes` in stages across
  // hosts.
  // Asked only while the timeline records: the choice costs a few cost-model predictions.
  auto phaseOf = [&](std::size_t bytes, bool fused) -> const char* {
    if (!timeline) return nullptr;
    if (collectives::runsHierarchicalAllreduce(comm, bytes, options))
      return fused ? "HIERARCHICAL_ALLREDUCE (fused)" : "HIERARCHICAL_ALLREDUCE";
    return fused ? "ALLREDUCE (fused)" : "ALLREDUCE";
  };
  if (chunk.size() == 1) {
    const char* phase = phaseOf(slots[chunk[0]].meta.bytes(), false);
    auto t0 = Clock::now();
    ++counters_.collectives;
    const AllreduceSlot& s = slots[chunk[0]];
    Tensor in{const_cast<void*>(s.input), s.meta.dtype, s.meta.shape};
    Tensor out{s.output, s.meta.dtype, s.meta.shape};
    collectives::allreduce(comm, in, out, params.reduceOp, options);
    mark(phase, 0, 1, t0, Clock::now());
    timeline_.record(events);
    return;
  }
  // The chunk's tensors are reduced as their concatenation, one piece of it at a time: copied
  // into the fusion buffer, allreduced, copied back out. Every rank cuts the same pieces.
  std::vector<std::size_t> starts{0};  // where each tensor begins in the concatenation
  for (auto i : chunk) starts.push_back(starts.back() + slots[i].meta.bytes());
  std::size_t total = starts.back();
  DType dtype = slots[chunk[0]].meta.dtype;
  std::size_t elementBytes = collectives::dtypeSize(dtype);
  std::size_t piece = fusionPieceBytes(total, elementBytes, comm);
  if (fusionBuffer_.size() < std::min(piece, total)) fusionBuffer_.resize(std::min(piece, total));
  std::size_t first = 0;  // the first tensor with bytes at or after `begin`
  for (std::size_t begin = 0; begin < total; begin += piece) {
    std::size_t end = std::min(total, begin + piece);
    while (starts[first + 1] <= begin) ++first;
    std::size_t last = first;  // one past the last tensor with bytes before `end`
    while (last < chunk.size() && starts[last] < end) ++last;
    // Calls copy(tensor, offset in the tensor, offset in the buffer, bytes) for each tensor's
    // run of bytes within [begin, end).
    auto forEachRun = [&](auto copy) {
      for (std::size_t k = first; k < last; ++k) {
        std::size_t from = std::max(begin, starts[k]), to = std::min(end, starts[k + 1]);
        if (to > from) copy(slots[chunk[k]], from - starts[k], from - begin, to - from);
      }
    };
    auto t0 = Clock::now();
    forEachRun(
        [&](const AllreduceSlot& s, std::size_t inTensor, std::size_t inBuffer, std::size_t bytes) {
          std::memcpy(fusionBuffer_.data() + inBuffer,
                      static_cast<const std::byte*>(s.input) + inTensor, bytes);
        });
    auto t1 = Clock::now();
    Tensor fused{fusionBuffer_.data(), dtype, {static_cast<int64_t>((end - begin) / elementBytes)}};
    ++counters_.collectives;
    collectives::allreduce(comm, fused, fused, params.reduceOp, options);
    auto t2 = Clock::now();
    forEachRun(
        [&](const AllreduceSlot& s, std::size_t inTensor, std::size_t inBuffer, std::size_t bytes) {
          std::memcpy(static_cast<std::byte*>(s.output) + inTensor, fusionBuffer_.data() + inBuffer,
                      bytes);
        });
    mark("MEMCPY_IN_FUSION_BUFFER", first, last, t0, t1);
    mark(phaseOf(end - begin, true), first, last, t1, t2);
    mark("MEMCPY_OUT_FUSION_BUFFER", first, last, t2, Clock::now());
  }
  counters_.fusedTensors += chunk.size();
  timeline_.record(events);
}

collectives::Allocate Executor::allocatorFor(LocalOp& op, std::size_t index) {
  if (op.op.allocate) return op.op.allocate;
  return [&op, index](const std::vector<int64_t>& shape) -> void* {
    TensorMeta meta{op.request.tensors.at(index).dtype, shape};
    OwnedBuffer buffer = allocateHostBuffer(meta.bytes());
    void* data = buffer.bytes.get();
    op.result.owned.push_back(std::move(buffer));
    return data;
  };
}

void Executor::runOne(LocalOp& op, collectives::Comm& comm) {
  auto t0 = Clock::now();
  ++counters_.collectives;
  auto& inputs = op.op.inputs;
  switch (op.op.type) {
    case OpType::Broadcast: {
      collectives::BroadcastOptions options;
      options.maxSegmentBytes = options_.segmentBytes;
      options.model = options_.networkModel.get();
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = op.op.outputs.empty() ? inputs[i] : op.op.outputs[i];
        if (t.data != inputs[i].data && comm.rank() == op.op.root)
          std::memcpy(t.data, inputs[i].data, t.bytes());
        collectives::broadcast(comm, t, op.op.root, options);
      }
      break;
    }
    case OpType::Allgather:
      for (std::size_t i = 0; i < inputs.size(); ++i)
        op.result.outputs.push_back(collectives::allgather(comm, inputs[i], allocatorFor(op, i)));
      break;
    case OpType::Reducescatter:
      for (std::size_t i = 0; i < inputs.size(); ++i)
        op.result.outputs.push_back(
            collectives::reducescatter(comm, inputs[i], op.op.reduceOp, allocatorFor(op, i)));
      break;
    case OpType::Alltoall: {
      auto r = collectives::alltoall(comm, inputs[0], op.op.splits, allocatorFor(op, 0));
      op.result.outputs.push_back(r.output);
      op.result.receivedSplits.push_back(r.receivedSplits);
      break;
    }
    case OpType::Barrier:
      collectives::barrier(comm);
      break;
    default:
      throw InternalError(detail::concat("executor cannot run ", opTypeName(op.op.type)));
  }
  if (timeline_.active()) {
    // As for allreduce, the timeline names the algorithm when allgathers run in stages.
    bool staged =
        op.op.type == OpType::Allgather && comm.hierarchy() && comm.hierarchy()->allgather;
    timeline_.record({{timelineRow(op.op.type, op.request.name),
                       timelinePhase(op.op.type, staged ? "HIERARCHICAL" : ""), t0, Clock::now(),
                       op.request.totalBytes()}});
  }
}

}  // namespace hvd::runtime
