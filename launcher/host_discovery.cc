#include "launcher/host_discovery.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/logging.h"
#include "launcher/exit_status.h"
#include "launcher/local_spawner.h"

namespace hvd::launcher {

using Clock = std::chrono::steady_clock;

std::vector<HostSlots> parseDiscoveredHosts(const std::string& output, int defaultSlots,
                                            const std::string& script) {
  static const std::regex kSlots(":[0-9]+$");
  std::vector<HostSlots> hosts;
  std::istringstream lines(output);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    std::vector<HostSlots> one;
    try {
      one = parseHostList(line);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(detail::concat("--host-discovery-script ", script, ": line ", number,
                                           " '", line, "': ", e.what()));
    }
    if (one.size() != 1)
      throw InvalidArgument(detail::concat("--host-discovery-script ", script, ": line ", number,
                                           " '", line, "': one host per line"));
    if (!std::regex_search(line, kSlots)) one[0].slots = defaultSlots;
    for (const auto& h : hosts)
      if (h.host == one[0].host)
        throw InvalidArgument(detail::concat("--host-discovery-script ", script, ": line ", number,
                                             ": host ", h.host, " listed twice"));
    hosts.push_back(one[0]);
  }
  return hosts;
}

std::vector<HostSlots> runDiscoveryScript(const std::string& script, int defaultSlots,
                                          const Environment& env, std::chrono::milliseconds timeout,
                                          std::atomic<pid_t>* running) {
  LocalWorker child = spawnLocal(script, {script}, env);
  if (running) *running = child.pid;
  std::string out, err;
  auto deadline = Clock::now() + timeout;
  int fds[2] = {child.stdoutFd, child.stderrFd};
  std::string* sinks[2] = {&out, &err};
  bool timedOut = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !p[i].revents) continue;
      char buf[4096];
      ssize_t got = ::read(fds[i], buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(got));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  if (timedOut) ::kill(-child.pid, SIGKILL);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {}
  if (running) *running = -1;
  if (timedOut)
    throw TimeoutError(detail::concat("--host-discovery-script ", script, " ran longer than ",
                                      timeout.count() / 1000, " s and was killed"));
  ExitStatus ended = fromWaitStatus(status);
  if (ended.failed()) {
    if (!err.empty() && err.back() == '\n') err.pop_back();
    throw Error(detail::concat("--host-discovery-script ", script, " ", ended.describe(),
                               err.empty() ? std::string() : ": " + err));
  }
  return parseDiscoveredHosts(out, defaultSlots, script);
}

namespace {
constexpr auto kScriptTimeout = std::chrono::seconds(30);
}

HostDiscovery::HostDiscovery(std::string script, int defaultSlots, Environment env,
                             std::chrono::milliseconds interval)
    : script_(std::move(script)),
      defaultSlots_(defaultSlots),
      env_(std::move(env)),
      interval_(interval) {
  initial_ = runDiscoveryScript(script_, defaultSlots_, env_, kScriptTimeout);
  latest_ = initial_;
  thread_ = std::thread([this] { loop(); });
}

HostDiscovery::~HostDiscovery() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  if (pid_t pid = running_.load(); pid > 0) ::kill(-pid, SIGKILL);
  wake_.notify_all();
  thread_.join();
}

std::vector<HostSlots> HostDiscovery::latest() {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_;
}

void HostDiscovery::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [&] { return stop_; })) {
    lock.unlock();
    // Stopped between the wait and the start: the destructor may have looked for a script to
    // kill already.
    {
      std::lock_guard<std::mutex> check(mutex_);
      if (stop_) return;
    }
    std::vector<HostSlots> hosts;
    std::string error;
    try {
      hosts = runDiscoveryScript(script_, defaultSlots_, env_, kScriptTimeout, &running_);
    } catch (const Error& e) {
      error = e.what();
    }
    lock.lock();
    if (error.empty()) {
      latest_ = std::move(hosts);
      lastError_.clear();
    } else if (error != lastError_) {
      log::logger("launcher")->warn("{} (keeping the hosts it gave before)", error);
      lastError_ = error;
    }
  }
}

}  // namespace hvd::launcher
