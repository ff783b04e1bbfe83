#include "runtime/engine/handle.h"

#include "common/error.h"

namespace hvd::runtime {

bool OpHandle::poll() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}

OpResult& OpHandle::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_.wait_for(lock, timeout, [&] { return finished_; }))
    throw TimeoutError(detail::concat(description_, ": not complete after ",
                                      timeout.count() / 1000.0,
                                      " s (HVD_OP_TIMEOUT sets the limit)"));
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
