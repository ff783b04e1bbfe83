// Allreduces small enough to ride on negotiation. A rank sends such an allreduce's input bytes
// with its request; when every rank has, the coordinator reduces them itself and sends the
// result with the response, and no collective runs. That takes a lone small allreduce (a loss,
// a metric, a step counter) from three trips between ranks (request, response, the collective's
// exchange) to two. Every rank copies the same result bytes, so results stay bit-identical.
// Which allreduces qualify is decided per rank from its own request and HVD_INLINE_ALLREDUCE_BYTES;
// the coordinator falls back to a normal collective whenever any rank sent no data (a joined
// rank, a rank configured differently).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/engine/local_op.h"

namespace hvd::runtime {

// True for a host-memory allreduce of 1 to `maxBytes` bytes (all its tensors together).
bool travelsInline(const OpRequest& request, std::size_t maxBytes);
// The operation's input tensors, back to back.
std::string packInputs(const LocalOp& op);
// The allreduce of `contributions` (one per rank, in rank order, each packed as packInputs
// does) with the request's op and scale factors, as the collective would compute it: prescale
// each contribution, reduce (float16/bfloat16 accumulate in float32), divide for Average,
// postscale. Throws InvalidArgument for an op the dtype does not support.
std::string reduceInline(const OpRequest& request,
                         const std::vector<const std::string*>& contributions);
// Copies a result from reduceInline into the operation's outputs (its inputs when in place).
void unpackResult(const std::string& result, LocalOp& op);

}  // namespace hvd::runtime
