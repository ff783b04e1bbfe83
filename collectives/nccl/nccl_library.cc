#include "collectives/nccl/nccl_library.h"

#include <dlfcn.h>

#include <mutex>

#include "common/error.h"

namespace hvd::collectives::nccl {
namespace {

void* openNccl(std::string& path, std::string& tried) {
  // Already in the process (a framework loaded it): use that one.
  if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) {
    path = "libnccl.so.2 (already loaded)";
    return h;
  }
  for (const char* candidate : {"libnccl.so.2", HVD_NCCL_LIBRARY_PATH}) {
    if (void* h = dlopen(candidate, RTLD_NOW | RTLD_LOCAL)) {
      path = candidate;
      return h;
    }
    const char* why = dlerror();
    tried += detail::concat(tried.empty() ? "" : "; ", candidate, ": ", why ? why : "not found");
  }
  return nullptr;
}

template <typename F>
void bind(void* handle, F& fn, const char* name, const std::string& path) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn)
    throw Error(
        detail::concat("NCCL library ", path, " has no ", name, " (hvd needs NCCL 2.18 or newer)"));
}

NcclLibrary load() {
  NcclLibrary lib;
  std::string tried;
  void* h = openNccl(lib.path, tried);
  if (!h)
    throw Error("cannot load NCCL for GPU collectives (" + tried +
                "); install NCCL or add its folder to LD_LIBRARY_PATH, or set "
                "HVD_GPU_BACKEND=staged");
  bind(h, lib.getVersion, "ncclGetVersion", lib.path);
  bind(h, lib.getUniqueId, "ncclGetUniqueId", lib.path);
  bind(h, lib.commInitRankConfig, "ncclCommInitRankConfig", lib.path);
  bind(h, lib.commGetAsyncError, "ncclCommGetAsyncError", lib.path);
  bind(h, lib.commAbort, "ncclCommAbort", lib.path);
  bind(h, lib.commFinalize, "ncclCommFinalize", lib.path);
  bind(h, lib.commDestroy, "ncclCommDestroy", lib.path);
  bind(h, lib.getErrorString, "ncclGetErrorString", lib.path);
  bind(h, lib.getLastError, "ncclGetLastError", lib.path);
  bind(h, lib.allReduce, "ncclAllReduce", lib.path);
  bind(h, lib.broadcast, "ncclBroadcast", lib.path);
  bind(h, lib.allGather, "ncclAllGather", lib.path);
  bind(h, lib.reduceScatter, "ncclReduceScatter", lib.path);
  bind(h, lib.reduce, "ncclReduce", lib.path);
  bind(h, lib.send, "ncclSend", lib.path);
  bind(h, lib.recv, "ncclRecv", lib.path);
  bind(h, lib.groupStart, "ncclGroupStart", lib.path);
  bind(h, lib.groupEnd, "ncclGroupEnd", lib.path);
  return lib;
}

}  // namespace

const NcclLibrary& ncclLibrary() {
  static std::once_flag once;
  static NcclLibrary lib;
  static std::exception_ptr error;
  std::call_once(once, [] {
    try {
      lib = load();
    } catch (...) {
      error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
  return lib;
}

}  // namespace hvd::collectives::nccl
