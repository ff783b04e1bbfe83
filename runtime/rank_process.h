// The set-up of a rank's process before its links open: freed memory kept for reuse
// (HVD_MALLOC_RETAIN_MB), the CPU binding of ranks hvdrun started (HVD_BIND_TO), and an
// open-file limit that fits a socket to every peer.
#pragma once

#include "common/logging.h"
#include "runtime/config.h"
#include "runtime/cpu_binding.h"

namespace hvd::runtime {

// `ownProcess`: this process is one rank (not one of the ranks a test runs as threads), so it
// may bind itself and raise its limits. Binding comes before the engine's and the transport's
// threads start, so they inherit it. Returns this rank's CPUs after any binding.
CpuShareFacts prepareRankProcess(const Config& config, bool ownProcess, log::Logs& logs);

}  // namespace hvd::runtime
