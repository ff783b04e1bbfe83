#include "launcher/ssh/ssh_relay.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/params.h"
#include "launcher/signal_pipe.h"
#include "launcher/ssh/remote_command.h"

namespace hvd::launcher::ssh {
namespace {

void writeAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher is gone; nothing left to tell
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void fail(const std::string& message) {
  std::string line = "hvdrun: " + message + "\n";
  writeAll(STDERR_FILENO, line.data(), line.size());
  ::_exit(255);
}

std::string policyName(HostKeyPolicy p) {
  switch (p) {
    case HostKeyPolicy::AcceptNew: return "accept-new";
    case HostKeyPolicy::Strict: return "strict";
    case HostKeyPolicy::Off: return "off";
  }
  return "strict";
}

HostKeyPolicy policyFromName(const std::string& s) {
  if (s == "accept-new") return HostKeyPolicy::AcceptNew;
  if (s == "off") return HostKeyPolicy::Off;
  if (s == "strict") return HostKeyPolicy::Strict;
  throw InvalidArgument("unknown host key policy '" + s + "'");
}

// Status of a rank the remote shell reported as 128+N was death by signal N; raising it here
// makes the launcher's report read the same as for a local rank.
[[noreturn]] void exitLike(int remoteStatus) {
  if (remoteStatus > 128 && remoteStatus < 128 + NSIG) {
    int sig = remoteStatus - 128;
    rlimit noCore{0, 0};
    ::setrlimit(RLIMIT_CORE, &noCore);
    ::signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
    ::raise(sig);
  }
  ::_exit(remoteStatus & 0xff);
}

}  // namespace

std::string encodeRelaySpec(const RelaySpec& spec) {
  const SshTarget& t = spec.target;
  nlohmann::json j = {{"alias", t.alias},
                      {"address", t.address},
                      {"port", t.port},
                      {"user", t.user},
                      {"agent_socket", t.agentSocket},
                      {"identity_files", t.identityFiles},
                      {"known_hosts", t.knownHostsPath},
                      {"host_key_policy", policyName(t.hostKeyPolicy)},
                      {"connect_timeout_ms", t.connectTimeout.count()},
                      {"script", spec.script}};
  return j.dump();
}

RelaySpec decodeRelaySpec(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    RelaySpec spec;
    SshTarget& t = spec.target;
    t.alias = j.at("alias").get<std::string>();
    t.address = j.at("address").get<std::string>();
    t.port = j.at("port").get<int>();
    t.user = j.at("user").get<std::string>();
    t.agentSocket = j.at("agent_socket").get<std::string>();
    t.identityFiles = j.at("identity_files").get<std::vector<std::string>>();
    t.knownHostsPath = j.at("known_hosts").get<std::string>();
    t.hostKeyPolicy = policyFromName(j.at("host_key_policy").get<std::string>());
    t.connectTimeout = std::chrono::milliseconds(j.at("connect_timeout_ms").get<int64_t>());
    spec.script = j.at("script").get<std::string>();
    return spec;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string(kRelaySpecVariable) + " is malformed: " + e.what());
  }
}

int runSshRelay() {
  auto env = params::environmentSnapshot();
  auto text = env.find(kRelaySpecVariable);
  if (text == env.end())
    fail(std::string(kRelayFlag) + " is internal to hvdrun (no " + kRelaySpecVariable + ")");
  RelaySpec spec;
  try {
    spec = decodeRelaySpec(text->second);
  } catch (const Error& e) {
    fail(e.what());
  }
  std::unique_ptr<SignalPipe> signals;
  try {
    signals = std::make_unique<SignalPipe>(std::initializer_list<int>{SIGTERM, SIGINT, SIGHUP});
  } catch (const Error& e) {
    fail(std::string("relay: ") + e.what());
  }
  ::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<SshSession> session;
  LIBSSH2_CHANNEL* channel = nullptr;
  try {
    session = SshSession::connect(spec.target);
    LIBSSH2_SESSION* s = session->raw();
    channel = libssh2_channel_open_session(s);
    if (!channel) throw SshError(SshFailure::Protocol, session->where() + "cannot open a channel");
    if (libssh2_channel_exec(channel, bootstrapCommand().c_str()) != 0)
      throw SshError(SshFailure::Protocol, session->where() + "cannot start the rank");
    std::string input = framed(spec.script);
    for (std::size_t sent = 0; sent < input.size();) {
      ssize_t n = libssh2_channel_write(channel, input.data() + sent, input.size() - sent);
      if (n < 0) throw SshError(SshFailure::Protocol, session->where() + "cannot send the script");
      sent += static_cast<std::size_t>(n);
    }
  } catch (const Error& e) {
    fail(e.what());
  }
  LIBSSH2_SESSION* s = session->raw();
  // A host that vanishes without closing the connection fails the rank within ~30 s rather
  // than whenever TCP gives up.
  unsigned int userTimeoutMs = 30000;
  ::setsockopt(session->socket(), IPPROTO_TCP, TCP_USER_TIMEOUT, &userTimeoutMs,
               sizeof userTimeoutMs);
  libssh2_keepalive_config(s, 1, 10);
  libssh2_session_set_blocking(s, 0);

  bool lifelineClosed = false, eofSent = false;
  char buf[65536];
  for (;;) {
    bool progressed = false;
    for (int stream : {0, SSH_EXTENDED_DATA_STDERR}) {
      for (;;) {
        ssize_t n = libssh2_channel_read_ex(channel, stream, buf, sizeof buf);
        if (n > 0) {
          writeAll(stream == 0 ? STDOUT_FILENO : STDERR_FILENO, buf, static_cast<std::size_t>(n));
          progressed = true;
          continue;
        }
        if (n == LIBSSH2_ERROR_EAGAIN || n == 0) break;
        fail(session->where() + "ssh connection lost while rank was running (" +
             std::to_string(n) + ")");
      }
    }
    if (libssh2_channel_eof(channel)) break;
    if (progressed) continue;
    if (signals->next()) lifelineClosed = true;  // the remote script stops the rank's group
    if (lifelineClosed && !eofSent) {
      int rc = libssh2_channel_send_eof(channel);
      if (rc == 0) eofSent = true;
      else if (rc != LIBSSH2_ERROR_EAGAIN) fail(session->where() + "cannot stop the rank");
    }
    int nextKeepalive = 10;
    libssh2_keepalive_send(s, &nextKeepalive);
    int dirs = libssh2_session_block_directions(s);
    short events = 0;
    if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND) events |= POLLIN;
    if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
    pollfd fds[2] = {{session->socket(), static_cast<short>(events ? events : POLLIN), 0},
                     {signals->fd(), POLLIN, 0}};
    int n = ::poll(fds, 2, std::max(1, nextKeepalive) * 1000);
    if (n < 0 && errno != EINTR) fail("relay: poll failed: " + std::string(std::strerror(errno)));
    if (fds[0].revents & (POLLERR | POLLHUP) && !(fds[0].revents & POLLIN))
      fail(session->where() + "ssh connection lost while rank was running");
  }
  libssh2_session_set_blocking(s, 1);
  libssh2_session_set_timeout(s, 5000);
  libssh2_channel_close(channel);
  libssh2_channel_wait_closed(channel);
  char* exitSignal = nullptr;
  libssh2_channel_get_exit_signal(channel, &exitSignal, nullptr, nullptr, nullptr, nullptr,
                                  nullptr);
  int status = libssh2_channel_get_exit_status(channel);
  std::string signalName = exitSignal ? exitSignal : "";
  if (exitSignal) libssh2_free(s, exitSignal);
  libssh2_channel_free(channel);
  session.reset();
  if (!signalName.empty()) {
    std::string line = "hvdrun: the remote shell was ended by SIG" + signalName + "\n";
    writeAll(STDERR_FILENO, line.data(), line.size());
    ::_exit(255);
  }
  exitLike(status);
}

}  // namespace hvd::launcher::ssh
