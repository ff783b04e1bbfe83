#include "runtime/engine/admission.h"

#include <algorithm>

#include "common/error.h"
#include "common/format.h"

namespace hvd::runtime {

std::string quotedOpName(const Operation& op) {
  return op.name.empty() ? opTypeName(op.type) : "\"" + op.name + "\"";
}

int admitOperation(Operation& op, const ProcessSets& sets, int rank, int size) {
  // Messages only: a submission that passes builds no strings.
  auto opName = [&op] { return quotedOpName(op); };
  int setSize = size;
  if (op.type != OpType::AddProcessSet && op.type != OpType::RemoveProcessSet) {
    const auto* ranks = sets.ranks(op.processSet);
    if (!ranks)
      throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName(), ": process set ",
                                           op.processSet, " does not exist"));
    if (std::find(ranks->begin(), ranks->end(), rank) == ranks->end())
      throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName(), ": rank ", rank,
                                           " is not in process set ", op.processSet, " ",
                                           rankSet(*ranks)));
    setSize = static_cast<int>(ranks->size());
    if (op.type == OpType::Broadcast && op.processSet != 0) {
      auto root = std::find(ranks->begin(), ranks->end(), op.root);
      if (root == ranks->end())
        throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName(), ": root_rank ",
                                             op.root, " is not a member of process set ",
                                             op.processSet, " ", rankSet(*ranks),
                                             " (root_rank is a global rank)"));
      op.root = static_cast<int32_t>(root - ranks->begin());
    }
  }
  if (op.reduceOp == ReduceOp::Adasum) checkAdasumOperation(op, opName(), setSize);
  return setSize;
}

}  // namespace hvd::runtime
