#include "launcher/ssh/ssh_preflight.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "launcher/ssh/remote_command.h"

namespace hvd::launcher::ssh {
namespace {

struct Outcome {
  std::string failure;
  ReadyHost host;
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

LIBSSH2_CHANNEL* startCheck(SshSession& session, const std::string& script) {
  LIBSSH2_SESSION* s = session.raw();
  LIBSSH2_CHANNEL* channel = libssh2_channel_open_session(s);
  if (!channel)
    throw SshError(SshFailure::Protocol,
                   session.where() + "cannot open a channel (" + session.lastError() +
                       "); sshd's MaxSessions must allow " + std::to_string(kRanksPerConnection));
  try {
    if (libssh2_channel_exec(channel, bootstrapCommand().c_str()) != 0)
      throw SshError(SshFailure::Protocol,
                     session.where() + "cannot start the check: " + session.lastError());
    session.writeAll(channel, framed(script), "the check");
  } catch (const SshError&) {
    libssh2_channel_free(channel);
    throw;
  }
  return channel;
}

// Reads the check's stdout up to the ready line. Anything before it (a login script's chatter)
// is dropped. Returns the failure, empty when the rank may start.
std::string awaitReady(SshSession& session, LIBSSH2_CHANNEL* channel) {
  const std::string ready = std::string(kReadyLine) + "\n";
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = libssh2_channel_read(channel, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      if (out.find(ready) != std::string::npos) return "";
      continue;
    }
    if (n == 0) break;
    if (n == LIBSSH2_ERROR_TIMEOUT)
      return session.where() + "the check did not finish within " +
             std::to_string(session.target().connectTimeout.count()) + " ms";
    return session.where() + "the check failed: " + session.lastError();
  }
  // The script ended: it says why on stderr.
  std::string err;
  ssize_t n;
  while ((n = libssh2_channel_read_stderr(channel, buf, sizeof buf)) > 0)
    err.append(buf, static_cast<std::size_t>(n));
  libssh2_channel_close(channel);
  libssh2_channel_wait_closed(channel);
  std::string why = trimmed(err);
  if (why.empty())
    why = "the check script exited with status " +
          std::to_string(libssh2_channel_get_exit_status(channel)) + " before it was done" +
          (trimmed(out).empty() ? "" : " (it printed: " + trimmed(out) + ")");
  return session.where() + why;
}

std::string interrupted(const PreflightHost& host) {
  return host.target.describe() + ": the check was interrupted (hvdrun is stopping)";
}

Outcome check(const PreflightHost& host) {
  Outcome out;
  ReadyHost& ready = out.host;
  try {
    std::size_t connections = (host.ranks + kRanksPerConnection - 1) / kRanksPerConnection;
    for (std::size_t c = 0; c < connections; ++c) {
      ready.sessions.push_back(SshSession::connect(host.target, host.interrupt.get()));
      if (c == 0) ready.localAddress = ready.sessions[0]->localAddress();
    }
    // The remote shells start side by side: their login scripts run in parallel.
    for (std::size_t i = 0; i < host.ranks; ++i)
      ready.channels.push_back(
          startCheck(*ready.sessions[i / kRanksPerConnection], host.checkScript));
    for (std::size_t i = 0; i < host.ranks && out.failure.empty(); ++i)
      out.failure = awaitReady(*ready.sessions[i / kRanksPerConnection], ready.channels[i]);
  } catch (const Error& e) {
    out.failure = e.what();
  }
  if (!out.failure.empty() && host.interrupt && host.interrupt->interrupted())
    out.failure = interrupted(host);
  if (!out.failure.empty()) out.host = {};
  for (auto& session : out.host.sessions) session->stopWatching();
  return out;
}

}  // namespace

PreflightReport preflight(const std::vector<PreflightHost>& hosts, ConnectSlots& slots) {
  std::vector<Outcome> outcomes(hosts.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i; (i = next++) < hosts.size();) {
      auto slot = slots.acquire(hosts[i].interrupt.get());
      if (!slot) {
        outcomes[i].failure = interrupted(hosts[i]);
        continue;
      }
      outcomes[i] = check(hosts[i]);
    }
  };
  // A worker per slot, not per host: the slots bound the handshakes, and the workers the
  // threads. The caller is one of them, so one host (an elastic job's late host) costs none.
  std::size_t workers = std::min(slots.limit(), hosts.size());
  std::vector<std::thread> threads;
  for (std::size_t w = 1; w < workers; ++w)
    threads.emplace_back([&] {
      pthread_setname_np(pthread_self(), "hvd-ssh-check");
      work();
    });
  work();
  for (auto& t : threads) t.join();
  PreflightReport report;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (!outcomes[i].failure.empty())
      report.failures.push_back(outcomes[i].failure);
    else
      report.ready[hosts[i].target.alias] = std::move(outcomes[i].host);
  }
  return report;
}

}  // namespace hvd::launcher::ssh
