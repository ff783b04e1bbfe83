#include "launcher/ssh/connect_slots.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace hvd::launcher::ssh {
namespace {
constexpr auto kInterruptCheck = std::chrono::milliseconds(100);
}

ConnectSlots::ConnectSlots(std::size_t limit) : limit_(limit) {
  if (limit == 0)
    throw InvalidArgument("--ssh-concurrency (HVD_SSH_CONCURRENCY) must be at least 1");
}

ConnectSlots::Slot& ConnectSlots::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    if (owner_) owner_->release();
    owner_ = other.owner_;
    other.owner_ = nullptr;
  }
  return *this;
}

ConnectSlots::Slot::~Slot() {
  if (owner_) owner_->release();
}

ConnectSlots::Slot ConnectSlots::acquire(const CheckInterrupt* interrupt) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (interrupt && interrupt->interrupted()) return Slot();
    if (held_ < limit_) break;
    if (interrupt)
      freed_.wait_for(lock, kInterruptCheck);
    else
      freed_.wait(lock);
  }
  ++held_;
  peak_ = std::max(peak_, held_);
  return Slot(this);
}

std::size_t ConnectSlots::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void ConnectSlots::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --held_;
  }
  freed_.notify_one();
}

}  // namespace hvd::launcher::ssh
