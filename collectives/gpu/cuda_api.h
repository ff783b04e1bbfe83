// Thin RAII wrappers over the CUDA runtime calls the GPU backends use, and the one place CUDA
// errors become hvd::Errors. Compiled only when hvd is built with CUDA (HVD_WITH_NCCL).
// Thread model: objects are used by one thread at a time (the engine thread).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>

#include <memory>

#include "collectives/transport/request.h"  // Deadline

namespace hvd::collectives::gpu {

// Throws hvd::Error "<what>: <call>: <cudaErrorName>: <message>" unless status is cudaSuccess.
void checkCuda(cudaError_t status, const char* call, const std::string& what);
#define HVD_CUDA_CHECK(call, what) ::hvd::collectives::gpu::checkCuda((call), #call, (what))

// "CUDA 13.0 (driver supports 13.0)": the toolkit built with and the newest CUDA the driver
// offers.
std::string cudaVersionText();
// "0000:19:00.0", the device's PCI address: two ranks with the same one share the GPU.
std::string pciBusId(int device);

// Makes `device` current for the guard's lifetime, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A non-blocking stream of its own: it never synchronises with the legacy default stream, so
// the framework's work and hvd's only order through events.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);

 private:
  cudaEvent_t event_ = nullptr;
};

// Device memory that grows on demand (contents are not kept when it grows).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int device) : device_(device) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* reserve(std::size_t bytes);
  std::size_t size() const { return size_; }

 private:
  int device_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory: copies to and from it run at full PCIe speed and asynchronously.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::byte* reserve(std::size_t bytes);

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// Waits until the work queued on `stream` so far has finished, polling (never blocking inside
// CUDA, so a hung kernel or collective cannot hang the caller). `check` runs at every poll and
// throws to stop the wait (a backend's asynchronous error), and so may the engine's heartbeat
// (collectives::pulseIfDue: a silent peer, a failed job); past `deadline` TimeoutError is thrown
// naming `what`. Before any exception leaves, `abandon` runs (it aborts the unfinished work).
void synchronize(cudaStream_t stream, Deadline deadline, const std::string& what,
                 const std::function<void()>& check = {},
                 const std::function<void()>& abandon = {});

// Memory for an output tensor on `device`, freed with cudaFree when the last owner lets go.
std::shared_ptr<std::byte> allocateOnDevice(int device, std::size_t bytes);

}  // namespace hvd::collectives::gpu
