// How a worker ended, from a waitpid status: the code hvdrun exits with (128+signal for a
// signal) and a sentence for the failure summary.
#pragma once

#include <string>

namespace hvd::launcher {

struct ExitStatus {
  bool signaled = false;
  int code = 0;  // exit code, or the signal number when signaled
  // The worker never ran: its host failed the SSH check (unreachable, refused the login, lacks
  // the program). Reported with code 255, as ssh does.
  bool unstarted = false;
  // hvdrun's SSH connection to the worker's host broke while it ran (the host or its sshd went
  // away, a deleted Kubernetes pod): how it ended is unknown. Code 255, as ssh reports it.
  bool connectionLost = false;
  int shellCode() const { return signaled ? 128 + code : code; }
  bool failed() const { return signaled || code != 0; }
  std::string describe() const;  // "exited with code 3", "was killed by signal SIGKILL (...)"
};

ExitStatus fromWaitStatus(int status);
std::string signalName(int signal);  // "SIGSEGV"

}  // namespace hvd::launcher
