// How many hosts hvdrun connects to and checks at once (--ssh-concurrency,
// HVD_SSH_CONCURRENCY). Each check is a TCP connect, an SSH key exchange, host key and user
// authentication and the check script's round trips: milliseconds of hvdrun's CPU and a
// socket or two each. At 1,000 hosts, all at once meant 1,000 threads and 1,000 handshakes
// competing for a few cores (their timeouts then fire on hosts that were only slow to be
// served), and a burst of connections that a site's rate limits (a bastion's or a firewall's,
// sshd's MaxStartups) may refuse. A slot is held for one host's whole check; a host keeps the
// connection it was checked on, so a slot is never needed again for that host.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "launcher/ssh/check_interrupt.h"

namespace hvd::launcher::ssh {

class ConnectSlots {
 public:
  explicit ConnectSlots(std::size_t limit);  // throws InvalidArgument for 0

  // A held slot, given back when destroyed; false when the wait for it was interrupted.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    friend class ConnectSlots;
    explicit Slot(ConnectSlots* owner) : owner_(owner) {}
    ConnectSlots* owner_ = nullptr;
  };

  // Blocks until a slot is free. With an interrupt, returns an empty Slot once it is
  // interrupted (seen within 100 ms: CheckInterrupt wakes sockets, not this wait).
  Slot acquire(const CheckInterrupt* interrupt = nullptr);

  std::size_t limit() const { return limit_; }
  // The most slots held at once so far (for tests and the log).
  std::size_t peak() const;

 private:
  void release();

  const std::size_t limit_;
  mutable std::mutex mutex_;  // guards held_ and peak_
  std::condition_variable freed_;
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace hvd::launcher::ssh
