// hvd._core's operations: enqueue (arrays in, a Handle out), the Handle that keeps the arrays
// alive until the engine is done with them and waits with the GIL released, and the two
// exception types a failed operation raises.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

#include "runtime/runtime.h"

namespace hvd::python {

// The process's Runtime (runtime/current_runtime.h); InvalidArgument before hvd.init().
std::shared_ptr<runtime::Runtime> currentRuntime();

// Defines HorovodInternalError, OperationRejectedError, Handle, enqueue and empty in `m`, and
// translates C++ errors (InvalidArgument: ValueError; Error: HorovodInternalError).
void bindOperations(nanobind::module_& m);

}  // namespace hvd::python
