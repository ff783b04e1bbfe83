// Which tensors share a fusion buffer. The coordinator groups operations with it and every
// rank's executor cuts the same chunks from it, so both read the policy from here.
#pragma once

#include <optional>
#include <vector>

#include "runtime/engine/operation.h"

namespace hvd::runtime {

// Tensors this large skip the fusion buffer: copying them in and out costs more than the
// per-operation overhead fusing saves (measured with hvd-bench engine, docs/performance.md).
inline constexpr std::size_t kFuseBelowBytes = 256 << 10;

// Consecutive tensors of one dtype below kFuseBelowBytes share a chunk while it stays within
// the threshold; returns the tensor indices of each chunk. Any other tensor is a chunk of its
// own.
// Allreduces may share a fusion buffer only when these agree. A struct, not text: the
// coordinator computes it for every response on the latency-critical dispatch path.
struct FusionKey {
  DType dtype;
  ReduceOp reduceOp;
  double prescale, postscale;
  int32_t deviceIndex;
  int32_t processSet;
  bool operator==(const FusionKey&) const = default;
};

// The key of an allreduce whose tensors all may be fused; nullopt for any other request.
std::optional<FusionKey> fusionKey(const OpRequest& request);

std::vector<std::vector<std::size_t>> planFusion(const std::vector<TensorMeta>& tensors,
                                                 std::size_t thresholdBytes);

}  // namespace hvd::runtime
