#include "launcher/ssh/remote_command.h"

#include <regex>

namespace hvd::launcher::ssh {
namespace {

bool ignored(const std::string& name) {
  static const char* const kExact[] = {"HOME",
                                       "USER",
                                       "LOGNAME",
                                       "SHELL",
                                       "PWD",
                                       "OLDPWD",
                                       "HOSTNAME",
                                       "TERM",
                                       "DISPLAY",
                                       "MAIL",
                                       "SHLVL",
                                       "_",
                                       "CUDA_VISIBLE_DEVICES",
                                       "XDG_RUNTIME_DIR",
                                       "XDG_SESSION_ID",
                                       "PS1",
                                       "PS2",
                                       "LS_COLORS",
                                       "TMUX",
                                       "TMUX_PANE",
                                       "STY",
                                       "WINDOW",
                                       "MOTD_SHOWN"};
  for (const char* e : kExact)
    if (name == e) return true;
  for (const char* prefix : {"SSH_", "BASH_FUNC_"})
    if (name.rfind(prefix, 0) == 0) return true;
  static const std::regex kShellName("^[A-Za-z_][A-Za-z0-9_]*$");
  return !std::regex_match(name, kShellName);
}

bool namesScript(const std::string& arg) {
  auto endsWith = [&](const char* suffix) {
    std::string s(suffix);
    return arg.size() > s.size() && arg.compare(arg.size() - s.size(), s.size(), s) == 0;
  };
  return !arg.empty() && arg[0] != '-' && (endsWith(".py") || endsWith(".sh"));
}

std::string notFound(const std::string& hostLabel, const std::string& path) {
  return "{ echo " + shellQuote(hostLabel + ": " + path + ": not found") + " >&2; exit 127; }";
}

std::string checks(const RemoteRun& run) {
  const std::string& hostLabel = run.hostLabel;
  const std::string& workingDir = run.workingDir;
  const Environment& env = run.env;
  const std::vector<std::string>& argv = run.argv;
  std::string s =
      "cd " + shellQuote(workingDir) + " 2>/dev/null || " + notFound(hostLabel, workingDir) + "\n";
  if (auto path = env.find("PATH"); path != env.end())
    s += "PATH=" + shellQuote(path->second) + "; export PATH\n";
  if (!run.networkInterface.empty())
    s += "[ -e /sys/class/net/" + shellQuote(run.networkInterface) + " ] || { echo " +
         shellQuote(hostLabel + ": network interface '" + run.networkInterface +
                    "' not found (interfaces:") +
         "\" $(ls /sys/class/net | tr '\\n' ' '))\" >&2; exit 127; }\n";
  if (argv.empty()) return s;
  const std::string& program = argv[0];
  if (program.find('/') != std::string::npos)
    s += "[ -x " + shellQuote(program) + " ] || " + notFound(hostLabel, program) + "\n";
  else
    s += "command -v " + shellQuote(program) + " >/dev/null 2>&1 || " +
         notFound(hostLabel, program) + "\n";
  if (argv.size() > 1 && namesScript(argv[1]))
    s += "[ -e " + shellQuote(argv[1]) + " ] || " + notFound(hostLabel, argv[1]) + "\n";
  return s;
}

// The segment names are "<prefix>-<pid>-<random>"; the prefix is letters, digits and dashes.
std::string segmentCleanup(const RemoteRun& run) {
  std::string glob = "/dev/shm/" + run.shmSegmentPrefix + "-";
  std::string s = "n=0\n";
  s += "for f in " + shellQuote(glob) + "*; do\n";
  s += "  p=${f#" + shellQuote(glob) + "}; p=${p%%-*}\n";
  s += "  case $p in ''|*[!0-9]*) continue;; esac\n";
  s += "  kill -0 \"$p\" 2>/dev/null && continue\n";
  s += "  rm -f \"$f\" 2>/dev/null && n=$((n + 1))\n";
  s += "done\n";
  s += "[ $n = 0 ] || echo " + shellQuote("hvdrun: " + run.hostLabel + ": removed") + " \"$n\" " +
       shellQuote("shared-memory segments the job's ranks left in /dev/shm") + " >&2\n";
  return s;
}

}  // namespace

Environment forwardedEnvironment(const Environment& env) {
  Environment out;
  for (const auto& [name, value] : env)
    if (!ignored(name)) out[name] = value;
  return out;
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// Reads one framed() script from stdin and runs it in this shell. GNU head -c reads no more
// than its count. A head that read further could only swallow what follows a frame: nothing
// follows the check script until it has answered, and a lifeline command right behind the run
// script would land after its `exit` and be lost (the later `kill` still arrives).
constexpr const char* kReadFrame = "IFS= read -r n && s=$(head -c \"$n\") && eval \"$s\"";

std::string bootstrapCommand() { return std::string("exec /bin/sh -c '") + kReadFrame + "'"; }

std::string checkScript(const RemoteRun& run) {
  return checks(run) + "echo " + kReadyLine + "\n" + kReadFrame + " || exit 0\n";
}

std::string runScript(const RemoteRun& run) {
  std::string s;
  for (const auto& [name, value] : run.env)
    s.append(name)
        .append("=")
        .append(shellQuote(value))
        .append("; export ")
        .append(name)
        .append("\n");
  std::string command;
  for (const auto& a : run.argv) command.append(" ").append(shellQuote(a));
  // A non-interactive shell gives background jobs /dev/null as stdin unless redirected, so the
  // lifeline is kept on fd 3 for the watcher. setsid makes the command a process group leader
  // (it does not fork: a background job of a shell without job control leads no group).
  s += "exec 3<&0\n";
  s += "setsid" + command + " </dev/null 3<&- &\n";
  s += "pid=$!\n";
  s += "{ while IFS= read -r cmd; do case $cmd in term) kill -TERM -$pid;; "
       "kill) kill -KILL -$pid; exit;; esac; done; kill -TERM -$pid; sleep " +
       std::to_string(run.graceSeconds) + "; kill -KILL -$pid; } <&3 >/dev/null 2>&1 &\n";
  s += "watcher=$!\n";
  s += "exec 3<&-\n";
  s += "wait $pid\n";
  s += "rc=$?\n";
  // Whatever the command left in its group goes with it, as for local ranks.
  s += "kill -KILL -$pid 2>/dev/null\n";
  s += "kill $watcher 2>/dev/null\n";
  if (!run.shmSegmentPrefix.empty()) s += segmentCleanup(run);
  s += "exit $rc\n";
  return s;
}

std::string framed(const std::string& script) {
  return std::to_string(script.size()) + "\n" + script;
}

}  // namespace hvd::launcher::ssh
