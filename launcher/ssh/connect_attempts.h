// The decisions of connecting to a host within its connect timeout, with no I/O: SshSession's
// connect (ssh_session.cc) resolves the host, tries each address in turn with a non-blocking
// connect, and asks this how long to wait, whether to go on, and what to report.
//   - One deadline covers every address together: a slow address uses up the time, and no
//     further address is tried once it has passed (a socket() that fails at once costs none,
//     so the next address is always tried after one).
//   - With an interrupt, waits are cut into slices of kInterruptSliceMs so that a stop is seen
//     within one.
//   - When no address connected, the error is the last failure's: refused (is sshd running on
//     the port?), timed out (after how long, naming --ssh-connect-timeout), unreachable, or
//     anything else with its strerror text. Every message starts with `where` (the host).
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

  // What to throw when no address connected.
  SshError error(const SshTarget& target, const std::string& where) const;

 private:
  int remainingMs(Time now) const;

  std::chrono::milliseconds timeout_;
  Time deadline_;
  bool interruptible_;
  int lastErrno_ = 0;
};

}  // namespace hvd::launcher::ssh
