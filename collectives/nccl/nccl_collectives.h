// GPU-to-GPU collectives through NCCL, one NCCL communicator per host communicator (process
// set) and device.
//
// Bootstrap: collective over `host`. Rank 0 creates the NCCL unique id and broadcasts it over
// the host communicator (which the rendezvous built), then every rank joins the NCCL
// communicator. NCCL runs in non-blocking mode, so neither the join nor any later call can hang
// the engine thread: every wait polls NCCL's asynchronous error and the operation timeout, and
// on failure or timeout the communicator is aborted (its kernels stop) and the error names the
// rank, host, operation, NCCL's result and its last error string.
//
// Operations: allreduce (all ops; average and scale factors by kernels around ncclAllReduce),
// broadcast, allgather (ncclAllGather when every rank sends as many rows, else one ncclBroadcast
// per rank in a group), alltoall (grouped ncclSend/ncclRecv), reducescatter (ncclReduceScatter
// for even parts, else one ncclReduce per part in a group). Rows and splits travel over `host`.
// uint16 and int16 have no NCCL type: their reductions are refused here (the caller stages them).
// Thread model: one thread at a time.
#pragma once

#include <nccl.h>

#include <chrono>
#include <string>

#include "collectives/gpu/gpu_collectives.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::collectives::nccl {

// "NCCL 2.28.9 (headers)", or with `loadLibrary` "NCCL 2.28.9 (library 2.28.3 from PATH)": the
// headers built against and the library in use (loading it: nccl_library.h).
std::string ncclVersionText(bool loadLibrary);
// "2.28.3 from libnccl.so.2": the library in use, loaded if it was not; throws hvd::Error saying
// why it cannot be loaded.
std::string ncclLibraryText();

// Whether the NCCL backend can run an operation of this dtype (16-bit integer reductions cannot).
bool reducible(DType dtype);

class NcclCollectives : public gpu::GpuCollectives {
 public:
  // Collective over `host`; `timeout` bounds the join. Throws hvd::Error with NCCL's message.
  // `logs`: the owning Runtime's, for the line that announces the communicator; null: the
  // process's.
  NcclCollectives(Comm& host, int device, std::chrono::milliseconds timeout, std::string hostname,
                  log::Logs* logs = nullptr);
  ~NcclCollectives() override;
  const char* name() const override { return "nccl"; }

  void allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                 const AllreduceOptions& options, cudaStream_t stream) override;
  void broadcast(const Tensor& tensor, int root, cudaStream_t stream) override;
  Tensor allgather(const Tensor& input, const Allocate& allocate, cudaStream_t stream) override;
  AlltoallResult alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                          const Allocate& allocate, cudaStream_t stream) override;
  Tensor reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                       cudaStream_t stream) override;
  void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what) override;
  void abandon() override { abort(); }

 private:
  // Completes a non-blocking NCCL call: polls while NCCL reports it in progress (up to the
  // timeout), aborts the communicator and throws on failure.
  void finish(ncclResult_t result, const char* call, const std::string& what);
  void checkAsync(const std::string& what);
  [[noreturn]] void fail(ncclResult_t result, const char* call, const std::string& what);
  void abort();

  Comm& host_;
  int device_;
  std::chrono::milliseconds timeout_;
  std::string hostname_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
};

}  // namespace hvd::collectives::nccl
