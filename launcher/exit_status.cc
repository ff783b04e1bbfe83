#include "launcher/exit_status.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

namespace hvd::launcher {

std::string signalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

ExitStatus fromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

std::string ExitStatus::describe() const {
  if (unstarted) return "could not be started on its host (exit code " + std::to_string(code) + ")";
  if (connectionLost)
    return "was lost with hvdrun's SSH connection to its host (the host, its sshd or the network "
           "went away)";
  if (!signaled) return "exited with code " + std::to_string(code);
  std::string out = "was killed by signal " + std::to_string(code) + " (" + signalName(code) + ")";
  if (code == SIGKILL)
    out += "; SIGKILL is often the kernel's out-of-memory killer: check `dmesg` on that host";
  return out;
}

}  // namespace hvd::launcher
