#include "runtime/engine/local_op.h"

#include <numeric>

#include "common/error.h"

namespace hvd::runtime {
namespace {

bool takesTensors(OpType t) {
  return t != OpType::Barrier && t != OpType::Join && t != OpType::AddProcessSet &&
         t != OpType::RemoveProcessSet;
}

void checkTensor(const std::string& what, const collectives::Tensor& t) {
  for (auto d : t.shape)
    if (d < 0) throw InvalidArgument(detail::concat(what, ": negative dimension ", d));
  if (t.data == nullptr && t.numElements() > 0)
    throw InvalidArgument(what + ": data pointer is null");
}

void checkSplits(const std::string& what, const Operation& op, int setSize) {
  const auto& t = op.inputs[0];
  if (t.shape.empty()) throw InvalidArgument(what + ": alltoall needs at least one dimension");
  if (op.splits.empty()) {
    if (t.shape[0] % setSize != 0)
      throw InvalidArgument(detail::concat(what, ": first dimension ", t.shape[0],
                                           " does not divide by the process set size ", setSize,
                                           "; pass splits"));
    return;
  }
  if (static_cast<int>(op.splits.size()) != setSize)
    throw InvalidArgument(detail::concat(what, ": ", op.splits.size(), " splits for ", setSize,
                                         " ranks"));
  int64_t sum = 0;
  for (auto s : op.splits) {
    if (s < 0) throw InvalidArgument(detail::concat(what, ": negative split ", s));
    sum += s;
  }
  if (sum > t.shape[0])
    throw InvalidArgument(detail::concat(what, ": splits sum to ", sum,
                                         ", more than the first dimension ", t.shape[0]));
}

}  // namespace

OpRequest describeOperation(const Operation& op, int setSize) {
  OpRequest r;
  r.type = op.type;
  r.name = op.name;
  r.reduceOp = op.reduceOp;
  r.root = op.root;
  r.prescale = op.prescale;
  r.postscale = op.postscale;
  r.processSet = op.processSet;
  r.device = op.device;
  r.setRanks = op.setRanks;
  std::string what = r.describe();
  if (takesTensors(op.type) && op.inputs.empty())
    throw InvalidArgument(what + ": no tensors given");
  if (!takesTensors(op.type) && !op.inputs.empty())
    throw InvalidArgument(what + ": takes no tensors");
  if (!op.device.isCpu())
    throw InvalidArgument(detail::concat(what, ": tensor on ", op.device.describe(),
                                         ": this build of hvd has no GPU support"));
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    std::string tensorWhat = op.inputs.size() > 1 ? detail::concat(what, " tensor ", i) : what;
    checkTensor(tensorWhat, op.inputs[i]);
    r.tensors.push_back({op.inputs[i].dtype, op.inputs[i].shape});
  }
  if (!op.outputs.empty()) {
    if (op.type != OpType::Allreduce && op.type != OpType::Broadcast)
      throw InvalidArgument(what + ": output tensors are only for allreduce and broadcast");
    if (op.outputs.size() != op.inputs.size())
      throw InvalidArgument(detail::concat(what, ": ", op.outputs.size(), " outputs for ",
                                           op.inputs.size(), " inputs"));
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const auto& in = op.inputs[i];
      const auto& out = op.outputs[i];
      checkTensor(what + " output", out);
      if (out.dtype != in.dtype || out.numElements() != in.numElements())
        throw InvalidArgument(detail::concat(what, ": output ", i, " has ", out.numElements(),
                                             " ", collectives::dtypeName(out.dtype),
                                             " elements, input has ", in.numElements(), " ",
                                             collectives::dtypeName(in.dtype)));
    }
  }
  if (op.type == OpType::Broadcast && (op.root < 0 || op.root >= setSize))
    throw InvalidArgument(detail::concat(what, ": root rank ", op.root, " outside [0, ",
                                         setSize, ")"));
  if (op.type == OpType::Reducescatter)
    for (const auto& t : op.inputs)
      if (t.shape.empty())
        throw InvalidArgument(what + ": reducescatter needs at least one dimension, got a scalar");
  if (op.type == OpType::Reducescatter && op.reduceOp != ReduceOp::Sum &&
      op.reduceOp != ReduceOp::Average)
    throw InvalidArgument(detail::concat(what, ": reducescatter supports sum and average, not ",
                                         collectives::reduceOpName(op.reduceOp)));
  if (op.type == OpType::Alltoall) {
    if (op.inputs.size() != 1) throw InvalidArgument(what + ": alltoall takes one tensor");
    checkSplits(what, op, setSize);
  }
  if (op.type != OpType::Alltoall && !op.splits.empty())
    throw InvalidArgument(what + ": splits are only for alltoall");
  return r;
}

}  // namespace hvd::runtime
