#include "runtime/malloc_retention.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "common/error.h"

namespace hvd::runtime {

void retainFreedMemory(std::size_t bytes, spdlog::logger& log) {
  if (bytes == 0) return;
  std::size_t mb = bytes >> 20;
#if defined(__GLIBC__)
  HVD_ENFORCE(bytes <= static_cast<std::size_t>(INT_MAX), "HVD_MALLOC_RETAIN_MB=", mb,
              " passed the registry's range check");  // params.cc caps it at 2047
  // Setting either threshold also ends glibc's own adjustment of the mmap threshold, which
  // would otherwise stop at 32 MiB and keep trimming what the next step allocates again.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes)) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes)) != 1)
    throw InvalidArgument(
        detail::concat("HVD_MALLOC_RETAIN_MB=", mb, ": glibc's mallopt refused the value"));
  log.debug(
      "malloc: blocks of up to {} MB come from the heap, and up to {} MB freed stays in it "
      "(HVD_MALLOC_RETAIN_MB)",
      mb, mb);
#else
  throw InvalidArgument(
      detail::concat("HVD_MALLOC_RETAIN_MB=", mb,
                     ": needs glibc's malloc, which this build does not use; unset it"));
#endif
}

}  // namespace hvd::runtime
