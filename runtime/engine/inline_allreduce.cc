#include "runtime/engine/inline_allreduce.h"

#include <cstring>

#include "collectives/algorithms/reduce.h"
#include "common/error.h"

namespace hvd::runtime {

bool travelsInline(const OpRequest& request, std::size_t maxBytes) {
  std::size_t bytes = request.totalBytes();
  return request.type == OpType::Allreduce && request.device.isCpu() && bytes > 0 &&
         bytes <= maxBytes && request.reduceOp != ReduceOp::Adasum;
}

std::string packInputs(const LocalOp& op) {
  std::string packed;
  packed.reserve(op.request.totalBytes());
  for (const auto& t : op.op.inputs) packed.append(static_cast<const char*>(t.data), t.bytes());
  return packed;
}

std::string reduceInline(const OpRequest& request,
                         const std::vector<const std::string*>& contributions) {
  HVD_ENFORCE(!contributions.empty(), request.describe(), ": no contributions to reduce");
  std::string result(request.totalBytes(), '\0');
  for (const std::string* c : contributions)
    HVD_ENFORCE(c->size() == result.size(), request.describe(), ": inline data of ", c->size(),
                " bytes, expected ", result.size());
  std::string scaled;
  std::size_t offset = 0;
  for (const TensorMeta& meta : request.tensors) {
    collectives::checkReducible(meta.dtype, request.reduceOp);
    std::size_t count = meta.numElements(), bytes = meta.bytes();
    char* out = result.data() + offset;
    for (std::size_t r = 0; r < contributions.size(); ++r) {
      const char* in = contributions[r]->data() + offset;
      const char* operand = in;
      if (request.prescale != 1.0) {
        scaled.assign(in, bytes);
        collectives::scale(scaled.data(), count, meta.dtype, request.prescale);
        operand = scaled.data();
      }
      if (r == 0)
        std::memcpy(out, operand, bytes);
      else
        collectives::reduceInto(out, operand, count, meta.dtype, request.reduceOp);
    }
    collectives::finishAllreduce(out, count, meta.dtype, request.reduceOp,
                                 static_cast<int>(contributions.size()), request.postscale);
    offset += bytes;
  }
  return result;
}

void unpackResult(const std::string& result, LocalOp& op) {
  HVD_ENFORCE(result.size() == op.request.totalBytes(), op.request.describe(),
              ": inline result of ", result.size(), " bytes, expected ", op.request.totalBytes());
  std::size_t offset = 0;
  for (std::size_t t = 0; t < op.op.inputs.size(); ++t) {
    const auto& in = op.op.inputs[t];
    void* out = op.op.outputs.empty() ? in.data : op.op.outputs[t].data;
    std::memcpy(out, result.data() + offset, in.bytes());
    offset += in.bytes();
  }
}

}  // namespace hvd::runtime
