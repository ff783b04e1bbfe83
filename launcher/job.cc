#include "launcher/job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/logging.h"
#include "launcher/exit_status.h"
#include "launcher/failure_hint.h"
#include "launcher/local_spawner.h"

namespace hvd::launcher {

using Clock = std::chrono::steady_clock;

namespace {

// After the last worker exits, output still in flight gets this long to arrive.
constexpr auto kDrainTime = std::chrono::seconds(2);

}  // namespace

struct Job::Worker {
  RankPlacement placement;
  int label = 0;        // the output's [N]: the rank, or an elastic job's worker number
  LocalWorker process;  // pid -1 for a remote rank
  int fds[2] = {-1, -1};
  bool exited = false;
  bool remote = false;
  bool stoppedByPolicy = false;
  bool endedInStop = false;    // ended after the job began to stop (its signals may be ours)
  Clock::time_point killAt{};  // stopWorker's SIGKILL deadline
  ExitStatus status;
};

Job::Job(const LaunchOptions& options, std::vector<WorkerSpec> workers, RemoteRanks& remote,
         OrphanGuardian& guardian)
    : options_(options), specs_(std::move(workers)), remote_(remote), guardian_(guardian) {
  output_ = std::make_unique<OutputForwarder>(static_cast<int>(specs_.size() + remote_.rankCount()),
                                              STDOUT_FILENO, STDERR_FILENO, options.outputDir,
                                              options.prefixTimestamp);
}

Job::~Job() {
  for (auto& w : workers_)
    for (int fd : w.fds)
      if (fd >= 0) ::close(fd);
}

int Job::run() {
  signals_ =
      std::make_unique<SignalPipe>(std::initializer_list<int>{SIGCHLD, SIGINT, SIGTERM, SIGHUP});
  try {
    spawnAll();
    if (policy_) policy_->tick(*this);
  } catch (const Error& e) {
    beginStop(std::string("could not start every worker: ") + e.what());
    log::logger("launcher")->error("{}", e.what());
    firstFailure_ = -2;
  }
  eventLoop();
  killAll(SIGKILL);  // anything a worker left behind in its group
  guardian_.dismiss();
  blameFromReports();
  printSummary();
  if (firstFailure_ >= 0) return workers_[firstFailure_].status.shellCode();
  if (!failReason_.empty()) return 1;
  if (firstFailure_ == -2) return 1;
  if (interruptSignal_) return 128 + interruptSignal_;
  return 0;
}

void Job::spawnAll() {
  auto log = log::logger("launcher");
  // Remote ranks first: their channels open on the host threads while local ranks start.
  for (const auto& streams : remote_.start()) {
    adoptRemote(streams);
    log->info("starting rank {} on {} over ssh", streams.id, streams.placement.hostname);
  }
  for (auto& spec : specs_) startLocal(spec, spec.placement.rank);
}

void Job::startLocal(WorkerSpec& spec, int label) {
  Worker w;
  w.placement = spec.placement;
  w.label = label;
  w.process = spawnLocal(spec.executable, spec.argv, spec.env);
  w.fds[0] = w.process.stdoutFd;
  w.fds[1] = w.process.stderrFd;
  guardian_.watch(w.process.pid);
  workers_.push_back(w);
  log::logger("launcher")
      ->info("started {} {} on {} as pid {}", policy_ ? "worker" : "rank", label,
             w.placement.hostname, w.process.pid);
}

int Job::addWorker(WorkerSpec spec) {
  int label = output_->addRank();
  startLocal(spec, label);
  return label;
}

int Job::nextLabel() { return output_->addRank(); }

void Job::addRemoteWorkers(LateHost host) {
  std::string name = host.check.target.alias;
  for (const auto& streams : remote_.launch(std::move(host))) {
    adoptRemote(streams);
    log::logger("launcher")
        ->info("checking {} over ssh to start worker {} there", name, streams.id);
  }
}

void Job::adoptRemote(const RemoteRankStreams& streams) {
  Worker w;
  w.placement = streams.placement;
  w.label = streams.id;
  w.remote = true;
  w.fds[0] = streams.stdoutFd;
  w.fds[1] = streams.stderrFd;
  workers_.push_back(w);
}

void Job::stopWorker(int label) {
  for (auto& w : workers_)
    if (w.label == label && !w.exited) {
      w.stoppedByPolicy = true;
      if (w.remote)
        remote_.signal(w.label, SIGTERM);
      else
        ::kill(-w.process.pid, SIGTERM);
      w.killAt = Clock::now() + options_.grace;
    }
}

void Job::fail(const std::string& reason) {
  if (stopping_) return;
  failReason_ = reason;
  firstFailure_ = -2;
  beginStop(reason);
}

void Job::eventLoop() {
  auto nextTick = Clock::now() + kPolicyTick;
  while (!allDone()) {
    std::vector<pollfd> fds{{signals_->fd(), POLLIN, 0}, {remote_.wakeFd(), POLLIN, 0}};
    std::vector<std::pair<Worker*, int>> owners{{nullptr, 0}, {nullptr, 0}};
    for (auto& w : workers_)
      for (int s = 0; s < 2; ++s)
        if (w.fds[s] >= 0) {
          fds.push_back({w.fds[s], POLLIN, 0});
          owners.push_back({&w, s});
        }
    int timeoutMs = -1;
    auto now = Clock::now();
    std::vector<Clock::time_point> deadlines{killDeadline_, drainDeadline_};
    if (policy_ && !stopping_) deadlines.push_back(nextTick);
    for (const auto& w : workers_)
      if (!w.exited) deadlines.push_back(w.killAt);
    for (auto deadline : deadlines)
      if (deadline != Clock::time_point{}) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
        int ms = static_cast<int>(std::max<long>(0, left) + 1);
        timeoutMs = timeoutMs < 0 ? ms : std::min(timeoutMs, ms);
      }
    int n = ::poll(fds.data(), fds.size(), timeoutMs);
    if (n < 0 && errno != EINTR) throw IoError(std::string("poll: ") + std::strerror(errno));
    for (std::size_t i = 2; n > 0 && i < fds.size(); ++i)
      if (fds[i].revents) readOutput(*owners[i].first, owners[i].second);
    if (n > 0 && fds[0].revents) {
      while (int sig = signals_->next()) handleSignal(sig);
    }
    if (n > 0 && fds[1].revents) collectRemoteEnds();
    now = Clock::now();
    if (killDeadline_ != Clock::time_point{} && now >= killDeadline_) {
      log::logger("launcher")->warn("grace period over: sending SIGKILL to remaining ranks");
      killAll(SIGKILL);
      killDeadline_ = {};
    }
    for (auto& w : workers_)
      if (!w.exited && w.killAt != Clock::time_point{} && now >= w.killAt) {
        if (w.remote)
          remote_.signal(w.label, SIGKILL);
        else
          ::kill(-w.process.pid, SIGKILL);
        w.killAt = {};
      }
    if (policy_ && !stopping_ && now >= nextTick) {
      nextTick = now + kPolicyTick;
      try {
        policy_->tick(*this);
      } catch (const Error& e) {
        fail(e.what());
      }
    }
  }
  for (auto& w : workers_)
    for (int s = 0; s < 2; ++s)
      if (w.fds[s] >= 0) {
        readOutput(w, s);
        output_->onEnd(w.label, static_cast<Stream>(s));
      }
}

bool Job::allDone() const {
  if (policy_ && !stopping_ && policy_->waiting()) return false;
  bool exited = true, drained = true;
  for (const auto& w : workers_) {
    exited &= w.exited;
    drained &= w.fds[0] < 0 && w.fds[1] < 0;
  }
  if (!exited) return false;
  return drained || (drainDeadline_ != Clock::time_point{} && Clock::now() >= drainDeadline_);
}

void Job::readOutput(Worker& w, int stream) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(w.fds[stream], buf, sizeof buf);
    if (n > 0) {
      output_->onData(w.label, static_cast<Stream>(stream), buf, n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    output_->onEnd(w.label, static_cast<Stream>(stream));
    ::close(w.fds[stream]);
    w.fds[stream] = -1;
    return;
  }
}

void Job::handleSignal(int sig) {
  if (sig == SIGCHLD) return reapWorkers();
  ++interrupts_;
  if (interrupts_ == 1) {
    interruptSignal_ = sig;
    beginStop(std::string("hvdrun received ") + signalName(sig));
  } else if (sig == SIGINT) {
    ::fprintf(stderr, "hvdrun: second interrupt: killing all ranks now\n");
    killAll(SIGKILL);
  }
}

void Job::reapWorkers() {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (w.exited || w.remote) continue;
    int status = 0;
    pid_t r = ::waitpid(w.process.pid, &status, WNOHANG);
    if (r == w.process.pid) onEnded(i, fromWaitStatus(status));
  }
}

void Job::collectRemoteEnds() {
  for (auto [id, status] : remote_.takeEnded())
    for (std::size_t i = 0; i < workers_.size(); ++i)
      if (workers_[i].remote && workers_[i].label == id && !workers_[i].exited) onEnded(i, status);
}

void Job::onEnded(std::size_t i, ExitStatus status) {
  Worker& w = workers_[i];
  w.exited = true;
  w.status = status;
  w.endedInStop = stopping_;
  const char* kind = policy_ ? "worker" : "rank";
  if (w.remote)
    log::logger("launcher")
        ->info("{} {} on {} {}", kind, w.label, w.placement.hostname, w.status.describe());
  else
    log::logger("launcher")
        ->info("{} {} (pid {}) {}", kind, w.label, w.process.pid, w.status.describe());
  // A worker the stop itself ended is not one that failed.
  if (w.status.failed() && !w.stoppedByPolicy && !stopping_) lastFailed_ = static_cast<int>(i);
  bool tolerated =
      policy_ && !stopping_ &&
      (w.stoppedByPolicy || policy_->tolerate(*this, w.label, w.placement.hostname, w.status));
  if (w.status.failed() && firstFailure_ == -1 && !stopping_ && !tolerated) {
    firstFailure_ = static_cast<int>(i);
    beginStop(detail::concat(kind, " ", w.label, " ", w.status.describe()));
  }
  bool allExited = true;
  for (const auto& other : workers_) allExited &= other.exited;
  if (allExited && drainDeadline_ == Clock::time_point{} &&
      !(policy_ && policy_->waiting() && !stopping_)) {
    drainDeadline_ = Clock::now() + kDrainTime;
    killDeadline_ = {};
  }
}

void Job::beginStop(const std::string& reason) {
  if (stopping_) return;
  stopping_ = true;
  log::logger("launcher")->info("stopping the job: {}", reason);
  killAll(SIGTERM);
  killDeadline_ = Clock::now() + options_.grace;
}

void Job::killAll(int sig) {
  for (const auto& w : workers_) {
    if (w.remote) {
      if (!w.exited) remote_.signal(w.label, sig);
    } else if (!w.exited || sig == SIGKILL) {
      ::kill(-w.process.pid, sig);
      // A stopped rank (SIGSTOP, a paused job) handles SIGTERM only once it runs again.
      if (sig == SIGTERM) ::kill(-w.process.pid, SIGCONT);
    }
  }
}

void Job::blameFromReports() {
  if (firstFailure_ < 0 || policy_ || !readReports_) return;
  std::vector<rendezvous::FailureReport> reports;
  try {
    reports = readReports_();
  } catch (const std::exception& e) {
    log::logger("launcher")->info("could not read the ranks' failure reports: {}", e.what());
    return;
  }
  auto indexOf = [&](int rank) -> int {
    for (std::size_t i = 0; i < workers_.size(); ++i)
      if (workers_[i].label == rank) return static_cast<int>(i);
    return -1;
  };
  int first = workers_[firstFailure_].label;
  bool firstBlamesPeer = false;
  for (const auto& r : reports) firstBlamesPeer |= r.rank == first && r.causedByPeer;
  // A rank that reported nothing (killed by a signal, or dead before it could) keeps the
  // headline: it may well be the cause.
  // The rank whose own error came first takes the headline if it failed by itself: a rank the
  // stop's SIGTERM ended would give the job that signal's exit code.
  int own = rendezvous::firstOwnFailure(reports);
  auto failedByItself = [](const Worker& w) {
    return w.status.failed() && !(w.status.signaled && w.endedInStop);
  };
  if (firstBlamesPeer && own >= 0 && indexOf(own) >= 0 && failedByItself(workers_[indexOf(own)]))
    firstFailure_ = indexOf(own);
  for (const auto& r : reports)
    if (r.causedByPeer && r.rank != workers_[firstFailure_].label) peerCaused_.push_back(r);
}

void Job::printSummary() const {
  const char* kind = policy_ ? "worker" : "rank";
  auto describe = [&](const Worker& w) {
    std::string text = detail::concat(
        kind, " ", w.label, " on host ", w.placement.hostname, w.remote ? " (over ssh" : " (pid ",
        w.remote ? "" : std::to_string(w.process.pid), ") ", w.status.describe(), "\n");
    auto lines = output_->lastStderrLines(w.label);
    if (lines.empty()) {
      text += detail::concat("hvdrun: ", kind, " ", w.label, " wrote nothing to stderr\n");
    } else {
      text += detail::concat("hvdrun: last stderr lines of ", kind, " ", w.label, ":\n");
      for (const auto& l : lines) text += "    " + l + "\n";
      text += failureHint(lines, options_.horovodCompat);
    }
    return text;
  };
  if (firstFailure_ >= 0) {
    std::string text = "hvdrun: job failed: " + describe(workers_[firstFailure_]);
    for (const auto& r : peerCaused_)
      text +=
          detail::concat("hvdrun: rank ", r.rank, " failed because of a peer: ", r.message, "\n");
    ::fputs(text.c_str(), stderr);
  } else if (!failReason_.empty()) {
    std::string text = "hvdrun: job failed: " + failReason_ + "\n";
    if (lastFailed_ >= 0)
      text += "hvdrun: the last worker to fail: " + describe(workers_[lastFailed_]);
    ::fputs(text.c_str(), stderr);
  } else if (interruptSignal_) {
    ::fprintf(stderr, "hvdrun: interrupted by %s: stopped %zu %ss\n",
              signalName(interruptSignal_).c_str(), workers_.size(), kind);
  }
}

}  // namespace hvd::launcher
