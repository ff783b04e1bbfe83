// Stops host checks that wait on the network, from another thread: hvdrun's Ctrl-C must not
// wait out the connect timeout of a host that accepts a connection and never answers. A check
// registers its sockets here while it runs; interrupt() shuts them down, so a blocked
// handshake, authentication or read returns at once and the check fails, and a TCP connect
// still in progress sees the flag within its next poll slice.
// Thread-safe.
#pragma once

#include <mutex>
#include <set>

namespace hvd::launcher::ssh {

class CheckInterrupt {
 public:
  void interrupt();
  bool interrupted() const;
  // Registers a socket of a check in progress; shuts it down at once when already interrupted.
  void watch(int fd);
  // Called before the socket is closed or handed on to a running rank.
  void unwatch(int fd);

 private:
  mutable std::mutex mutex_;
  bool interrupted_ = false;
  std::set<int> fds_;
};

}  // namespace hvd::launcher::ssh
