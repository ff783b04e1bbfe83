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
  resolveError_.clear();
  return !expired(now);
}

void ConnectAttempts::resolveFailed(const std::string& reason, bool transient) {
  resolveError_ = reason;
  resolveTransient_ = transient;
}

bool ConnectAttempts::retryable(Time now) const {
  if (expired(now)) return false;
  if (!resolveError_.empty()) return resolveTransient_;
  return lastErrno_ == ECONNREFUSED || lastErrno_ == EHOSTUNREACH || lastErrno_ == ENETUNREACH ||
         lastErrno_ == ENETDOWN;
}

std::chrono::milliseconds ConnectAttempts::backoff(Time now) {
  auto wait = std::min(nextBackoff_, std::chrono::milliseconds(remainingMs(now)));
  nextBackoff_ = std::min(nextBackoff_ * 2, std::chrono::milliseconds(2000));
  ++tries_;
  return wait;
}

std::string ConnectAttempts::lastFailure() const {
  if (!resolveError_.empty()) return "cannot resolve the name: " + resolveError_;
  return std::strerror(lastErrno_);
}

SshError ConnectAttempts::error(const SshTarget& target, const std::string& where) const {
  std::string tried = tries_ > 1 ? " (tried " + std::to_string(tries_) +
                                       " times within --ssh-connect-timeout " +
                                       std::to_string(timeout_.count()) + " ms)"
                                 : "";
  if (!resolveError_.empty())
    return SshError(SshFailure::Resolve,
                    where + "cannot resolve '" + target.address + "': " + resolveError_ + tried);
  switch (lastErrno_) {
    case ECONNREFUSED:
      return SshError(SshFailure::Refused, where + "connection refused (is sshd running on port " +
                                               std::to_string(target.port) + "?)" + tried);
    case ETIMEDOUT:
      return SshError(SshFailure::Timeout, where + "connection timed out after " +
                                               std::to_string(timeout_.count()) +
                                               " ms (--ssh-connect-timeout)" + tried);
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
      return SshError(SshFailure::Unreachable, where + std::strerror(lastErrno_) + tried);
    default:
      return SshError(SshFailure::Unreachable,
                      where + "cannot connect: " + std::strerror(lastErrno_) + tried);
  }
}

}  // namespace hvd::launcher::ssh
