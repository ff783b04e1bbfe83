#include "runtime/engine/fusion.h"

namespace hvd::runtime {

std::optional<FusionKey> fusionKey(const OpRequest& r) {
  // Adasum's coefficients come from each tensor's own dot products: no shared buffer.
  if (r.type != OpType::Allreduce || r.tensors.empty() || r.reduceOp == ReduceOp::Adasum)
    return std::nullopt;
  for (const auto& t : r.tensors)
    if (t.bytes() >= kFuseBelowBytes || t.dtype != r.tensors[0].dtype) return std::nullopt;
  return FusionKey{r.tensors[0].dtype, r.reduceOp,     r.prescale,
                   r.postscale,        r.device.index, r.processSet};
}

std::vector<std::vector<std::size_t>> planFusion(const std::vector<TensorMeta>& tensors,
                                                 std::size_t thresholdBytes) {
  std::vector<std::vector<std::size_t>> chunks;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::size_t b = tensors[i].bytes();
    bool small = b < kFuseBelowBytes;
    bool join = small && !chunks.empty() && thresholdBytes > 0 &&
                tensors[chunks.back().back()].bytes() < kFuseBelowBytes &&
                tensors[chunks.back().back()].dtype == tensors[i].dtype &&
                bytes + b <= thresholdBytes;
    if (join) {
      chunks.back().push_back(i);
      bytes += b;
    } else {
      chunks.push_back({i});
      bytes = b;
    }
  }
  return chunks;
}

}  // namespace hvd::runtime
