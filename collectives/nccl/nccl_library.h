// NCCL, loaded at the first GPU collective instead of at program start. Linking libnccl.so.2
// would load it whenever hvd is imported, and a framework imported after hvd (PyTorch loads its
// own NCCL) would then get hvd's copy under the same soname, which may lack symbols it needs.
// Loaded lazily, hvd uses the NCCL already in the process when there is one, else
// libnccl.so.2 from the library path, else the one found at build time.
// Thread model: ncclLibrary() may be called from any thread (loads once).
#pragma once

#include <nccl.h>

#include <string>

namespace hvd::collectives::nccl {

struct NcclLibrary {
  std::string path;  // where it was loaded from, for messages
  decltype(&::ncclGetVersion) getVersion;
  decltype(&::ncclGetUniqueId) getUniqueId;
  decltype(&::ncclCommInitRankConfig) commInitRankConfig;
  decltype(&::ncclCommGetAsyncError) commGetAsyncError;
  decltype(&::ncclCommAbort) commAbort;
  decltype(&::ncclCommFinalize) commFinalize;
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclGetErrorString) getErrorString;
  decltype(&::ncclGetLastError) getLastError;
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclReduceScatter) reduceScatter;
  decltype(&::ncclReduce) reduce;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
};

// Throws hvd::Error naming what was tried when NCCL cannot be loaded or lacks a function.
const NcclLibrary& ncclLibrary();

}  // namespace hvd::collectives::nccl
