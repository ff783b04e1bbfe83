// The process's current Runtime: hvd's only process-wide state. The C API (hvd_init,
// hvd_shutdown: runtime/c_api.cc) and the Python module (hvd._core: python/src/core.cc) both
// keep it here, so a program that uses both sees one Runtime. Everything else is owned by a
// Runtime and reaches it through its owner (runtime.h).
// Thread model: any thread may call any function. init and shutdown are serialised with each
// other; get() never waits for them (during a shutdown it already returns null).
#pragma once

#include <functional>
#include <memory>

#include "runtime/runtime.h"

namespace hvd::runtime::current_runtime {

// The current Runtime, or null before init() and once shutdown() has begun. The reference keeps
// it alive through a concurrent shutdown: the collective shutdown still runs, and the Runtime
// is destroyed when the last reference goes.
std::shared_ptr<Runtime> get();

// Makes a Runtime from makeConfig() the current one, unless there is one (then does nothing).
// Throws what makeConfig or Runtime::create throw, and there is then none.
void init(const std::function<Config()>& makeConfig);

// The collective shutdown of the current Runtime (Runtime::shutdown), which then is no longer
// current and is destroyed (with its threads, sockets and rendezvous server) unless a caller of
// get() still holds it. Does nothing without one. Rethrows the shutdown's error after the
// Runtime is gone.
void shutdown();

}  // namespace hvd::runtime::current_runtime
