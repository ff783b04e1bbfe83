// Keeping freed host memory in the process for reuse (HVD_MALLOC_RETAIN_MB).
//
// glibc's malloc serves a large block with mmap and gives it back with munmap when it is freed,
// and trims the top of its heap once enough is free there. A framework training on the CPU
// allocates the same activations every step, so with those defaults each step maps them
// afresh and the kernel zero-fills every page on its first touch, a step's page faults by the
// thousand (docs/performance.md measures it). Raising both thresholds keeps the blocks in the
// heap across steps.
#pragma once

#include <spdlog/logger.h>

#include <cstddef>

namespace hvd::runtime {

// Makes this process's malloc serve blocks of up to `bytes` from its heap and keep up to
// `bytes` of freed memory at the heap's top instead of returning it to the kernel. 0 changes
// nothing. Process-wide and idempotent. Throws InvalidArgument, naming HVD_MALLOC_RETAIN_MB,
// when the C library refuses the value or has no such setting (not glibc). Logs to `log`.
void retainFreedMemory(std::size_t bytes, spdlog::logger& log);

}  // namespace hvd::runtime
