#include "launcher/ssh/connect_attempts.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hvd::launcher::ssh {

int ConnectAttempts::remainingMs(Time now) const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - now);
  return static_cast<int>(std::max<long>(0, left.count()));
}

int ConnectAttempts::pollMs(Time now) const {
  int wait = remainingMs(now);
  return interruptible_ ? std::min(wait, kInterruptSliceMs) : wait;
}

bool ConnectAttempts::attemptFailed(int err, Time now) {
  lastErrno_ = err;
  return !expired(now);
}

SshError ConnectAttempts::error(const SshTarget& target, const std::string& where) const {
  switch (lastErrno_) {
    case ECONNREFUSED:
      return SshError(SshFailure::Refused, where + "connection refused (is sshd running on port " +
                                               std::to_string(target.port) + "?)");
    case ETIMEDOUT:
      return SshError(SshFailure::Timeout, where + "connection timed out after " +
                                               std::to_string(timeout_.count()) +
                                               " ms (--ssh-connect-timeout)");
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
      return SshError(SshFailure::Unreachable, where + std::strerror(lastErrno_));
    default:
      return SshError(SshFailure::Unreachable,
                      where + "cannot connect: " + std::strerror(lastErrno_));
  }
}

}  // namespace hvd::launcher::ssh
