#include "collectives/gpu/cuda_api.h"

#include <thread>

#include "collectives/transport/request.h"
#include "common/error.h"

namespace hvd::collectives::gpu {

void checkCuda(cudaError_t status, const char* call, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // a sticky error stays; a recoverable one should not poison later calls
  throw Error(detail::concat(what, ": ", call, ": ", cudaGetErrorName(status), ": ",
                             cudaGetErrorString(status)));
}

std::string cudaVersionText() {
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return detail::concat("CUDA ", CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10,
                        " (driver supports ", driver / 1000, ".", driver % 1000 / 10, ")");
}

std::string pciBusId(int device) {
  char id[32] = {};
  HVD_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof id, device), "cuda:" + std::to_string(device));
  return id;
}

DeviceGuard::DeviceGuard(int device) {
  HVD_CUDA_CHECK(cudaGetDevice(&previous_), "current device");
  if (previous_ != device) HVD_CUDA_CHECK(cudaSetDevice(device), "cuda:" + std::to_string(device));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  HVD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                 "stream on cuda:" + std::to_string(device));
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}

Event::Event(int device) {
  DeviceGuard guard(device);
  HVD_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                 "event on cuda:" + std::to_string(device));
}

Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) {
  HVD_CUDA_CHECK(cudaEventRecord(event_, stream), "event");
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

std::byte* DeviceBuffer::reserve(std::size_t bytes) {
  if (bytes <= size_) return data_;
  DeviceGuard guard(device_);
  if (data_) cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
  void* p = nullptr;
  HVD_CUDA_CHECK(cudaMalloc(&p, bytes),
                 detail::concat("fusion buffer of ", bytes, " bytes on cuda:", device_));
  data_ = static_cast<std::byte*>(p);
  size_ = bytes;
  return data_;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_) cudaFreeHost(data_);
}

std::byte* PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= size_) return data_;
  if (data_) cudaFreeHost(data_);
  data_ = nullptr;
  size_ = 0;
  void* p = nullptr;
  HVD_CUDA_CHECK(cudaMallocHost(&p, bytes), detail::concat("staging buffer of ", bytes, " bytes"));
  data_ = static_cast<std::byte*>(p);
  size_ = bytes;
  return data_;
}

namespace {

// The error that ended the wait is the one to report: a failure to abort comes second.
void abandonQuietly(const std::function<void()>& abandon) {
  try {
    if (abandon) abandon();
  } catch (...) {}
}

}  // namespace

void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what,
                 const std::function<void()>& check, const std::function<void()>& abandon) {
  // Spin briefly (short collectives finish in microseconds), then back off to 50 us sleeps.
  for (int polls = 0;; ++polls) {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return;
    try {
      if (status != cudaErrorNotReady) checkCuda(status, "cudaStreamQuery", what);
      if (check) check();
      pulseIfDue();  // the engine's heartbeats go on through a long GPU collective
    } catch (...) {
      // A silent peer or a failed job ends the wait while the work may never finish (a stopped
      // peer's NCCL kernel spins on): left running, it would hang the communicator's teardown.
      abandonQuietly(abandon);
      throw;
    }
    if (Clock::now() >= deadline) {
      abandonQuietly(abandon);
      throw TimeoutError(what +
                         ": the GPU work did not finish within the operation timeout "
                         "(HVD_OP_TIMEOUT); a peer may have stopped, or NCCL hung "
                         "(NCCL_DEBUG=INFO shows why)");
    }
    if (polls < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::shared_ptr<std::byte> allocateOnDevice(int device, std::size_t bytes) {
  DeviceGuard guard(device);
  void* p = nullptr;
  HVD_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)),
                 detail::concat("output of ", bytes, " bytes on cuda:", device));
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { cudaFree(q); });
}

}  // namespace hvd::collectives::gpu
