// What runs on a remote host, as text. The command line sshd sees (and `ps` shows) is a fixed
// bootstrap with nothing of the job in it; the real scripts (checks, then environment with the
// job secret and the user's command) follow on the channel's stdin, each prefixed by its length.
// The rest of stdin stays open as a lifeline: when it ends (hvdrun closed the channel, or its
// connection died), the script ends the command's process group, SIGTERM then SIGKILL, so no
// rank outlives its channel. Pure: no I/O.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hvd::launcher::ssh {

using Environment = std::map<std::string, std::string>;

// The launcher's environment minus what belongs to the remote login or machine (HOME, USER,
// SHELL, SSH_*, CUDA_VISIBLE_DEVICES, BASH_FUNC_*, OLDPWD, ...) and names a shell cannot export.
Environment forwardedEnvironment(const Environment& env);

// POSIX single-quoting: the result is one shell word with exactly the bytes of `s`.
std::string shellQuote(const std::string& s);

// The exec request's command line; the same for every job.
std::string bootstrapCommand();

struct RemoteRun {
  std::string hostLabel;  // the host as the user wrote it, for messages
  std::string workingDir;
  Environment env;  // already forwardedEnvironment()
  std::vector<std::string> argv;
  std::string networkInterface;  // empty: not checked
  int graceSeconds = 10;         // between SIGTERM and SIGKILL when the lifeline ends
  // Names "<prefix>-<pid>-..." in /dev/shm are the job's shared-memory segments
  // (collectives::shm::jobSegmentPrefix); empty: none to clean up.
  std::string shmSegmentPrefix;
};

// What hvdrun writes on a running rank's lifeline: SIGTERM to the rank's process group (hvdrun
// sends the kill itself when its grace period ends), or SIGKILL at once. When the lifeline ends
// instead (hvdrun died, the connection dropped), the watcher sends SIGTERM, waits the grace
// period and sends SIGKILL.
inline constexpr const char* kLifelineTerm = "term\n";
inline constexpr const char* kLifelineKill = "kill\n";

// Line the check script prints on stdout when every check passed.
inline constexpr const char* kReadyLine = "hvd-ready";

// First stage, sent as soon as the connection is up: checks the remote side can run argv from
// workingDir with env's PATH (the directory, the program, a script named as its first argument
// (*.py, *.sh), the network interface), then prints kReadyLine and waits for the second stage
// (runScript) on stdin and runs it in the same shell. Each failure prints
// "<hostLabel>: <path>: not found" (or what is missing) on stderr and exits 127; when stdin ends
// instead of a second stage, it exits without starting anything. Splitting the two lets every
// host be checked, with its shells already started, before any rank runs, and lets the second
// stage carry what is only known then (the rendezvous address, the job secret).
std::string checkScript(const RemoteRun& run);

// Second stage: the environment, then argv in its own process group, watched through the
// lifeline; exits with the command's status. Relies on the check script's shell (its working
// directory and PATH). Once the command has ended, it removes the job's shared-memory segments
// whose creating process is gone (a rank stopped during init cannot unlink its own), and says
// so on stderr; segments of the host's other ranks that still run are left alone.
std::string runScript(const RemoteRun& run);

// What to write to the bootstrap's stdin for `script`.
std::string framed(const std::string& script);

}  // namespace hvd::launcher::ssh
