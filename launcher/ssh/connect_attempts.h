// The decisions of connecting to a host within its connect timeout, with no I/O: SshSession's
// connect (ssh_session.cc) resolves the host, tries each address in turn with a non-blocking
// connect, and asks this how long to wait, whether to go on, and what to report.
//   - One deadline covers every address together: a slow address uses up the time, and no
//     further address is tried once it has passed (a socket() that fails at once costs none,
//     so the next address is always tried after one).
//   - With an interrupt, waits are cut into slices of kInterruptSliceMs so that a stop is seen
//     within one.
//   - A host that is still starting (a pod whose sshd does not listen yet, whose address has no
//     route yet, whose name is not yet in DNS: refused, unreachable, not resolvable) is tried
//     again, every address anew, after a backoff (100 ms, doubling up to 2 s), until the
//     deadline. Each kind of failure is logged once, at debug, by the caller.
//   - When no address connected, the error is the last failure's: refused (is sshd running on
//     the port?), timed out (after how long, naming --ssh-connect-timeout), unreachable, not
//     resolvable, or anything else with its strerror text, and how many times it was tried.
//     Every message starts with `where` (the host).
// Thread model: one object per connect, on the connecting thread. Time is passed in.
#pragma once

#include <chrono>
#include <string>

#include "launcher/ssh/ssh_session.h"

namespace hvd::launcher::ssh {

inline constexpr int kInterruptSliceMs = 100;

class ConnectAttempts {
 public:
  using Time = std::chrono::steady_clock::time_point;

  ConnectAttempts(std::chrono::milliseconds timeout, bool interruptible, Time now)
      : timeout_(timeout), deadline_(now + timeout), interruptible_(interruptible) {}

  // How long the next poll on a connect in progress may wait, in ms.
  int pollMs(Time now) const;
  // No time is left: a pending connect has timed out, and no other address is tried.
  bool expired(Time now) const { return remainingMs(now) == 0; }

  // socket() failed with `err`: the next address is tried.
  void socketFailed(int err) { lastErrno_ = err; }
  // Connecting to an address failed with `err` (ETIMEDOUT when the wait ran out): true when
  // time is left to try the next one.
  bool attemptFailed(int err, Time now);

  // The host's name did not resolve: `reason` is getaddrinfo's, `transient` whether a name
  // published later would resolve (no such name yet, a temporary failure).
  void resolveFailed(const std::string& reason, bool transient);

  // Every address failed in a way a host that is still starting gives, and time is left: the
  // caller waits backoff() and tries every address again.
  bool retryable(Time now) const;
  // How long to wait before the next try (100 ms, doubling up to 2 s; never past the deadline);
  // counts the try.
  std::chrono::milliseconds backoff(Time now);
  // The last failure in words, for the caller's debug log.
  std::string lastFailure() const;

  // What to throw when no address connected.
  SshError error(const SshTarget& target, const std::string& where) const;

 private:
  int remainingMs(Time now) const;

  std::chrono::milliseconds timeout_;
  Time deadline_;
  bool interruptible_;
  int lastErrno_ = 0;
  std::string resolveError_;  // set while the last try failed to resolve the name
  bool resolveTransient_ = false;
  int tries_ = 1;
  std::chrono::milliseconds nextBackoff_{100};
};

}  // namespace hvd::launcher::ssh
