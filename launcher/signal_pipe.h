// Signals delivered to an event loop as bytes on a pipe (the self-pipe trick): the handler only
// write(2)s the signal number, and the loop polls fd() and calls next(). A handler can reach only
// a global, so one SignalPipe may exist per process at a time (hvdrun's job).
#pragma once

#include <initializer_list>
#include <vector>

namespace hvd::launcher {

class SignalPipe {
 public:
  // Creates the pipe and installs the handler for `signals`. Throws IoError.
  explicit SignalPipe(std::initializer_list<int> signals);
  // Restores the default action of the signals and closes the pipe.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int fd() const;
  // The next signal received, or 0 when none is pending (never blocks).
  int next();

 private:
  std::vector<int> signals_;
};

}  // namespace hvd::launcher
