// The checks a submitted operation passes on the caller's thread, against the process sets
// this rank knows, before the engine takes it: the set exists and holds this rank, a process
// set's broadcast root is one of its members (and becomes the set's rank for it, since
// root_rank is a global rank, as in Horovod), and Adasum's conditions hold. Throws
// InvalidArgument naming the operation and the value.
#pragma once

#include <string>

#include "runtime/engine/local_op.h"
#include "runtime/engine/process_sets.h"

namespace hvd::runtime {

// How messages name an operation: its name quoted, or its type when it has none.
std::string quotedOpName(const Operation& op);

// Returns the size of the operation's process set (the job's size for adding or removing one).
int admitOperation(Operation& op, const ProcessSets& sets, int rank, int size);

}  // namespace hvd::runtime
