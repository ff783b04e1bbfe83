#include "runtime/engine/handle.h"

#include <algorithm>
#include <new>

#include "common/error.h"
#include "common/spin.h"

namespace hvd::runtime {

OwnedBuffer allocateHostBuffer(std::size_t bytes) {
  constexpr std::align_val_t alignment{kHostOutputAlignment};
  void* memory = ::operator new[](std::max<std::size_t>(bytes, 1), alignment);
  return OwnedBuffer{
      std::shared_ptr<std::byte>(static_cast<std::byte*>(memory),
                                 [](std::byte* p) { ::operator delete[](p, alignment); }),
      bytes, DeviceId{}};
}

bool OpHandle::poll() const { return finished_.load(std::memory_order_acquire); }

OpResult& OpHandle::wait(std::chrono::milliseconds timeout) {
  struct Blocked {  // counts this waiter for the data links while it waits
    std::atomic<int>* count;
    explicit Blocked(std::atomic<int>* c) : count(c) {
      if (count) count->fetch_add(1);
    }
    ~Blocked() {
      if (count) count->fetch_sub(1);
    }
  } blocked(blocked_.get());
  if (spin_.count() > 0)
    spinUntil(
        std::chrono::steady_clock::now() + std::min<std::chrono::microseconds>(spin_, timeout),
        [&] { return finished_.load(std::memory_order_acquire); });
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_.wait_for(lock, timeout, [&] { return finished_.load(std::memory_order_relaxed); }))
    throw TimeoutError(detail::concat(description_, ": not complete after ",
                                      timeout.count() / 1000.0,
                                      " s (the engine did not report a failure either; "
                                      "HVD_OP_TIMEOUT sets the limit)"));
  if (error_) std::rethrow_exception(error_);
  return result_;
}

void OpHandle::complete(OpResult result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
    finished_ = true;
  }
  done_.notify_all();
}

void OpHandle::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    finished_ = true;
  }
  done_.notify_all();
}

}  // namespace hvd::runtime
