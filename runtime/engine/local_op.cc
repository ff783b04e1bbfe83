#include "runtime/engine/local_op.h"

#include "collectives/algorithms/adasum.h"
#include "common/error.h"
#include "common/format.h"

namespace hvd::runtime {
namespace {

bool takesTensors(OpType t) {
  return t != OpType::Barrier && t != OpType::Join && t != OpType::AddProcessSet &&
         t != OpType::RemoveProcessSet;
}

}  // namespace

LocalOp::~LocalOp() {
  if (handle && !handle->poll())
    handle->fail(std::make_exception_ptr(
        InternalError(handle->description() + ": dropped by the engine without a result")));
}

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
  if (!op.device.isCpu() && !takesTensors(op.type))
    throw InvalidArgument(detail::concat(what, ": takes no device (", op.device.describe(), ")"));
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    std::string tensorWhat = op.inputs.size() > 1 ? detail::concat(what, " tensor ", i) : what;
    collectives::checkTensor(tensorWhat, op.inputs[i]);
    if (op.type == OpType::Allreduce || op.type == OpType::Reducescatter)
      collectives::checkReduction(tensorWhat, op.inputs[i].dtype, op.reduceOp, op.prescale,
                                  op.postscale);
    r.tensors.push_back({op.inputs[i].dtype, op.inputs[i].shape});
  }
  if (!op.outputs.empty()) {
    if (op.type != OpType::Allreduce && op.type != OpType::Broadcast)
      throw InvalidArgument(what + ": output tensors are only for allreduce and broadcast");
    if (op.outputs.size() != op.inputs.size())
      throw InvalidArgument(detail::concat(what, ": ", op.outputs.size(), " outputs for ",
                                           op.inputs.size(), " inputs"));
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      collectives::checkTensor(what + " output", op.outputs[i]);
      collectives::checkSameElements(what, op.inputs[i], op.outputs[i]);
    }
  }
  if (op.type == OpType::AddProcessSet) {
    // The communicator subset needs ranks in increasing order, each once, inside the job.
    const auto& ranks = op.setRanks;
    if (ranks.empty()) throw InvalidArgument(what + ": a process set needs at least one rank");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] < 0 || ranks[i] >= setSize)
        throw InvalidArgument(detail::concat(what, ": rank ", ranks[i], " in ", rankSet(ranks),
                                             " is outside the job's ranks [0,", setSize, ")"));
      if (i > 0 && ranks[i] == ranks[i - 1])
        throw InvalidArgument(detail::concat(what, ": rank ", ranks[i], " appears twice in ",
                                             rankSet(ranks), " (duplicate rank)"));
      if (i > 0 && ranks[i] < ranks[i - 1])
        throw InvalidArgument(
            detail::concat(what, ": ranks ", rankSet(ranks), " must be in increasing order"));
    }
  }
  if (op.type == OpType::Broadcast) collectives::checkRoot(what, op.root, setSize);
  if (op.type == OpType::Reducescatter)
    for (const auto& t : op.inputs) collectives::checkScatterable(what, t);
  if (op.type == OpType::Allgather)
    for (const auto& t : op.inputs) collectives::checkConcatenable(what, t);
  if (op.type == OpType::Reducescatter && op.reduceOp != ReduceOp::Sum &&
      op.reduceOp != ReduceOp::Average)
    throw InvalidArgument(detail::concat(what, ": reducescatter supports sum and average, not ",
                                         collectives::reduceOpName(op.reduceOp)));
  if (op.type == OpType::Alltoall) {
    if (op.inputs.size() != 1) throw InvalidArgument(what + ": alltoall takes one tensor");
    collectives::alltoallSplits(what, op.inputs[0], op.splits, setSize);
  }
  if (op.type != OpType::Alltoall && !op.splits.empty())
    throw InvalidArgument(what + ": splits are only for alltoall");
  return r;
}

void checkAdasumOperation(const Operation& op, const std::string& opName, int setSize) {
  auto what = [&] {
    return op.name.empty() ? detail::concat(opTypeName(op.type), ": ")
                           : detail::concat(opTypeName(op.type), " ", opName, ": ");
  };
  if (op.type != OpType::Allreduce)
    throw InvalidArgument(what() + "reduce op adasum applies to allreduce only");
  if (!op.device.isCpu())
    throw InvalidArgument(what() +
                          "reduce op adasum runs on host memory only; copy GPU "
                          "tensors to the CPU for it");
  try {
    for (const auto& t : op.inputs) collectives::checkAdasum(t.dtype, setSize);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what() + e.what());
  }
}

std::vector<Timeline::Event> negotiationEvents(const std::vector<LocalOp*>& ops,
                                               Timeline::Time now) {
  std::vector<Timeline::Event> events;
  for (const LocalOp* op : ops)
    if (op)
      events.push_back({timelineRow(op->request.type, op->request.name),
                        timelinePhase(op->request.type, "NEGOTIATE"), op->submittedAt, now,
                        op->request.totalBytes()});
  return events;
}

}  // namespace hvd::runtime
