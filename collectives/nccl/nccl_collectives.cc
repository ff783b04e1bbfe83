#include "collectives/nccl/nccl_collectives.h"

#include "collectives/nccl/nccl_library.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "collectives/algorithms/broadcast.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"
#include "collectives/gpu/cuda_api.h"
#include "collectives/gpu/kernels.h"
#include "common/error.h"
#include "common/logging.h"

namespace hvd::collectives::nccl {
namespace {

const NcclLibrary& lib() { return ncclLibrary(); }

ncclDataType_t ncclType(DType t) {
  switch (t) {
    case DType::UInt8:
      return ncclUint8;
    case DType::Bool:
      return ncclUint8;
    case DType::Int8:
      return ncclInt8;
    case DType::Int32:
      return ncclInt32;
    case DType::Int64:
      return ncclInt64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::UInt16:
    case DType::Int16:
      break;
  }
  throw InternalError(detail::concat("NCCL has no type for ", dtypeName(t)));
}

// bool holds 0 or 1: sum and max are "or", product and min are "and".
ncclRedOp_t ncclOp(ReduceOp op, DType t) {
  if (t == DType::Bool) return op == ReduceOp::Sum || op == ReduceOp::Max ? ncclMax : ncclMin;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      return ncclSum;  // then divided, as the host algorithms do
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Product:
      return ncclProd;
    case ReduceOp::Adasum:
      throw InvalidArgument(
          "reduce op adasum runs on host memory only; copy GPU tensors to the "
          "CPU for it");
  }
  throw InternalError("unknown reduce op");
}

std::byte* at(void* base, std::size_t offset) { return static_cast<std::byte*>(base) + offset; }

template <typename T>
bool allEqual(const std::vector<T>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
}

// A call inside a group only queues; its result is final at ncclGroupEnd.
void queued(ncclResult_t r, const char* call) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw Error(detail::concat(call, ": ", lib().getErrorString(r)));
}

}  // namespace

std::string ncclVersionText(bool loadLibrary) {
  std::string text = detail::concat("NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, ".", NCCL_PATCH);
  if (!loadLibrary) return text + " (headers)";
  return detail::concat(text, " (library ", ncclLibraryText(), ")");
}

std::string ncclLibraryText() {
  int runtime = 0;
  lib().getVersion(&runtime);
  return detail::concat(runtime / 10000, ".", runtime / 100 % 100, ".", runtime % 100, " from ",
                        lib().path);
}

bool reducible(DType dtype) { return dtype != DType::Int16 && dtype != DType::UInt16; }

NcclCollectives::NcclCollectives(Comm& host, int device, std::chrono::milliseconds timeout,
                                 std::string hostname, log::Logs* logs)
    : host_(host), device_(device), timeout_(timeout), hostname_(std::move(hostname)) {
  gpu::DeviceGuard guard(device_);
  ncclUniqueId id{};
  if (host_.rank() == 0) {
    ncclResult_t r = lib().getUniqueId(&id);
    if (r != ncclSuccess) fail(r, "ncclGetUniqueId", "creating the NCCL communicator");
  }
  collectives::broadcast(host_, &id, sizeof id, 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  finish(lib().commInitRankConfig(&comm_, host_.size(), id, host_.rank(), &config),
         "ncclCommInitRankConfig", "joining the NCCL communicator");
  log::logger(logs, "nccl")
      ->info("rank {}/{}: NCCL communicator on cuda:{} ({})", host_.rank(), host_.size(), device_,
             ncclVersionText(true));
}

NcclCollectives::~NcclCollectives() {
  if (!comm_) return;
  if (!aborted_) {
    // Finalize flushes NCCL's pending work; bounded, so a broken peer cannot hang shutdown.
    ncclResult_t r = lib().commFinalize(comm_);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    ncclResult_t state = r;
    while (r == ncclSuccess || r == ncclInProgress) {
      if (lib().commGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
      if (Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state != ncclSuccess) abort();
  }
  if (!aborted_) lib().commDestroy(comm_);
}

void NcclCollectives::abort() {
  if (comm_ && !aborted_) {
    lib().commAbort(comm_);
    aborted_ = true;
  }
}

void NcclCollectives::fail(ncclResult_t result, const char* call, const std::string& what) {
  const char* last = comm_ ? lib().getLastError(comm_) : lib().getLastError(nullptr);
  std::string message = detail::concat(
      "rank ", host_.rank(), "/", host_.size(), " on ", hostname_, " (cuda:", device_, "): ", what,
      ": ", call, " failed: ", lib().getErrorString(result),
      last && *last ? detail::concat(" (", last, ")") : std::string(),
      "; NCCL_DEBUG=INFO shows NCCL's own log");
  abort();
  if (result == ncclRemoteError || result == ncclSystemError) throw IoError(message);
  throw Error(message);
}

void NcclCollectives::checkAsync(const std::string& what) {
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = lib().commGetAsyncError(comm_, &state);
  if (r != ncclSuccess) fail(r, "ncclCommGetAsyncError", what);
  if (state != ncclSuccess && state != ncclInProgress) fail(state, "asynchronous error", what);
}

void NcclCollectives::finish(ncclResult_t result, const char* call, const std::string& what) {
  if (result != ncclSuccess && result != ncclInProgress) fail(result, call, what);
  auto deadline = Clock::now() + timeout_;
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = lib().commGetAsyncError(comm_, &state);
    if (r != ncclSuccess) fail(r, "ncclCommGetAsyncError", what);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(state, call, what);
    if (Clock::now() > deadline) {
      abort();
      throw TimeoutError(detail::concat(
          "rank ", host_.rank(), "/", host_.size(), " on ", hostname_, ": ", what, ": ", call,
          " still in progress after ", timeout_.count() / 1000,
          " s (HVD_OP_TIMEOUT); the NCCL communicator was aborted. A peer may have stopped; "
          "NCCL_DEBUG=INFO shows NCCL's own log"));
    }
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NcclCollectives::synchronize(cudaStream_t stream, Deadline deadline, const std::string& what) {
  if (aborted_) throw Error(what + ": the NCCL communicator was aborted after an earlier error");
  gpu::synchronize(
      stream, deadline, detail::concat("rank ", host_.rank(), " on ", hostname_, ": ", what),
      [&] { checkAsync(what); }, [&] { abort(); });
}

void NcclCollectives::allreduce(const Tensor& input, const Tensor& output, ReduceOp op,
                                const AllreduceOptions& options, cudaStream_t stream) {
  checkReducible(input.dtype, op);
  std::size_t n = input.numElements();
  if (n == 0) return;
  HVD_ENFORCE(reducible(input.dtype), "16-bit integer reductions go through host staging");
  const void* source = input.data;
  if (options.prescale != 1.0) {
    if (input.data != output.data)
      HVD_CUDA_CHECK(
          cudaMemcpyAsync(output.data, input.data, input.bytes(), cudaMemcpyDeviceToDevice, stream),
          "allreduce prescale");
    gpu::scaleOnDevice(output.data, n, input.dtype, options.prescale, stream);
    source = output.data;
  }
  finish(lib().allReduce(source, output.data, n, ncclType(input.dtype), ncclOp(op, input.dtype),
                         comm_, stream),
         "ncclAllReduce", "allreduce");
  if (op == ReduceOp::Average && host_.size() > 1)
    gpu::divideOnDevice(output.data, n, input.dtype, host_.size(), stream);
  if (options.postscale != 1.0)
    gpu::scaleOnDevice(output.data, n, input.dtype, options.postscale, stream);
}

void NcclCollectives::broadcast(const Tensor& tensor, int root, cudaStream_t stream) {
  checkTensor("broadcast", tensor);
  checkRoot("broadcast", root, host_.size());
  if (tensor.bytes() == 0) return;
  finish(lib().broadcast(tensor.data, tensor.data, tensor.bytes(), ncclUint8, root, comm_, stream),
         "ncclBroadcast", "broadcast");
}

Tensor NcclCollectives::allgather(const Tensor& input, const Allocate& allocate,
                                  cudaStream_t stream) {
  GatherPlan plan = planAllgather(host_, input);
  Tensor out{allocate(plan.shape), input.dtype, plan.shape};
  std::size_t rowBytes = input.rowElements() * dtypeSize(input.dtype);
  if (out.bytes() == 0) return out;
  if (allEqual(plan.rows)) {
    finish(lib().allGather(input.data, out.data, plan.rows[0] * rowBytes, ncclUint8, comm_, stream),
           "ncclAllGather", "allgather");
    return out;
  }
  // Different first dimensions: each rank broadcasts its block into its place.
  queued(lib().groupStart(), "ncclGroupStart");
  std::size_t offset = 0;
  for (int r = 0; r < host_.size(); ++r) {
    std::size_t bytes = plan.rows[r] * rowBytes;
    if (bytes > 0)
      queued(lib().broadcast(r == host_.rank() ? input.data : at(out.data, offset),
                             at(out.data, offset), bytes, ncclUint8, r, comm_, stream),
             "ncclBroadcast");
    offset += bytes;
  }
  finish(lib().groupEnd(), "ncclGroupEnd", "allgather (different first dimensions)");
  return out;
}

AlltoallResult NcclCollectives::alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                         const Allocate& allocate, cudaStream_t stream) {
  AlltoallPlan plan = planAlltoall(host_, input, splits);
  AlltoallResult result{{allocate(plan.shape), input.dtype, plan.shape}, plan.recvRows};
  std::size_t rowBytes = input.rowElements() * dtypeSize(input.dtype);
  int me = host_.rank();
  std::size_t sendOffset = 0, recvOffset = 0;
  queued(lib().groupStart(), "ncclGroupStart");
  for (int j = 0; j < host_.size(); ++j) {
    std::size_t sendBytes = plan.sendRows[j] * rowBytes, recvBytes = plan.recvRows[j] * rowBytes;
    if (j == me && sendBytes > 0) {
      HVD_CUDA_CHECK(cudaMemcpyAsync(at(result.output.data, recvOffset), at(input.data, sendOffset),
                                     sendBytes, cudaMemcpyDeviceToDevice, stream),
                     "alltoall: this rank's own rows");
    } else if (j != me) {
      if (sendBytes > 0)
        queued(lib().send(at(input.data, sendOffset), sendBytes, ncclUint8, j, comm_, stream),
               "ncclSend");
      if (recvBytes > 0)
        queued(
            lib().recv(at(result.output.data, recvOffset), recvBytes, ncclUint8, j, comm_, stream),
            "ncclRecv");
    }
    sendOffset += sendBytes;
    recvOffset += recvBytes;
  }
  finish(lib().groupEnd(), "ncclGroupEnd", "alltoall");
  return result;
}

Tensor NcclCollectives::reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate,
                                      cudaStream_t stream) {
  checkTensor("reducescatter", input);
  checkScatterable("reducescatter", input);
  checkReducible(input.dtype, op);
  HVD_ENFORCE(reducible(input.dtype), "16-bit integer reductions go through host staging");
  int n = host_.size(), me = host_.rank();
  // The host reducescatter's split: as even as possible, the first parts one row larger.
  const std::vector<std::size_t> rows =
      evenBlocks(static_cast<std::size_t>(input.shape[0]), n).counts;
  Tensor out{nullptr, input.dtype, input.shape};
  out.shape[0] = static_cast<int64_t>(rows[me]);
  out.data = allocate(out.shape);
  std::size_t rowElements = input.rowElements();
  if (input.numElements() == 0) return out;
  auto type = ncclType(input.dtype);
  auto redOp = ncclOp(op, input.dtype);
  if (allEqual(rows)) {
    finish(lib().reduceScatter(input.data, out.data, rows[0] * rowElements, type, redOp, comm_,
                               stream),
           "ncclReduceScatter", "reducescatter");
  } else {
    // Uneven parts: part r is reduced to rank r.
    queued(lib().groupStart(), "ncclGroupStart");
    std::size_t offset = 0, elementSize = dtypeSize(input.dtype);
    for (int r = 0; r < n; ++r) {
      std::size_t count = rows[r] * rowElements;
      if (count > 0)
        queued(lib().reduce(at(input.data, offset * elementSize), r == me ? out.data : nullptr,
                            count, type, redOp, r, comm_, stream),
               "ncclReduce");
      offset += count;
    }
    finish(lib().groupEnd(), "ncclGroupEnd", "reducescatter (uneven parts)");
  }
  if (op == ReduceOp::Average && n > 1)
    gpu::divideOnDevice(out.data, out.numElements(), input.dtype, n, stream);
  return out;
}

}  // namespace hvd::collectives::nccl
