#include "launcher/ssh/ssh_session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/logging.h"
#include "launcher/ssh/connect_attempts.h"
#include "launcher/ssh/host_key_check.h"
#include "launcher/ssh/known_hosts.h"

namespace hvd::launcher::ssh {

using Clock = std::chrono::steady_clock;

namespace {

void initLibssh2Once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (libssh2_init(0) != 0) throw IoError("libssh2_init failed");
  });
}

SshError interrupted(const std::string& where) {
  return SshError(SshFailure::Interrupted,
                  where + "the check was interrupted (hvdrun is stopping)");
}

// The host's addresses, or null with the failure recorded in `attempts`.
std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> resolve(const SshTarget& t,
                                                             ConnectAttempts& attempts) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(t.port);
  int rc = ::getaddrinfo(t.address.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    // A pod's DNS record appears once the pod runs: no such name yet, or a resolver that could
    // not answer now, may resolve later.
    attempts.resolveFailed(::gai_strerror(rc), rc == EAI_NONAME || rc == EAI_AGAIN);
    return {nullptr, ::freeaddrinfo};
  }
  return {found, ::freeaddrinfo};
}

// Sleeps `wait`, in slices when the check may be interrupted.
void sleepUnlessInterrupted(std::chrono::milliseconds wait, CheckInterrupt* interrupt,
                            const std::string& where) {
  auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    if (interrupt && interrupt->interrupted()) throw interrupted(where);
    std::this_thread::sleep_for(std::min<Clock::duration>(
        until - Clock::now(), std::chrono::milliseconds(kInterruptSliceMs)));
  }
}

void discard(int fd, CheckInterrupt* interrupt) {
  if (interrupt) interrupt->unwatch(fd);
  ::close(fd);
}

// Waits for a non-blocking connect: 0 or the errno it failed with (ETIMEDOUT when time ran
// out). Throws when interrupted, the socket discarded.
int awaitConnect(int fd, const ConnectAttempts& attempts, CheckInterrupt* interrupt,
                 const std::string& where) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    if (::poll(&p, 1, attempts.pollMs(Clock::now())) != 0) break;
    if (attempts.expired(Clock::now())) return ETIMEDOUT;
    if (interrupt && interrupt->interrupted()) {
      discard(fd, interrupt);
      throw interrupted(where);
    }
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

// Non-blocking connect to each resolved address in turn until one answers or time runs out
// (connect_attempts.h decides). With an interrupt, the socket is watched from its creation.
int connectWithTimeout(const SshTarget& t, const std::string& where, CheckInterrupt* interrupt) {
  ConnectAttempts attempts(t.connectTimeout, interrupt != nullptr, Clock::now());
  std::set<std::string> logged;  // each kind of failure is logged once
  for (;;) {
    auto found = resolve(t, attempts);
    for (addrinfo* a = found.get(); a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        attempts.socketFailed(errno);
        continue;
      }
      if (interrupt) interrupt->watch(fd);
      int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (err == EINPROGRESS) err = awaitConnect(fd, attempts, interrupt, where);
      if (err == 0) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return fd;
      }
      discard(fd, interrupt);
      if (interrupt && interrupt->interrupted()) throw interrupted(where);
      if (!attempts.attemptFailed(err, Clock::now())) break;
    }
    if (!attempts.retryable(Clock::now())) throw attempts.error(t, where);
    if (logged.insert(attempts.lastFailure()).second)
      log::logger("ssh")->debug("{}{}; trying again until --ssh-connect-timeout", where,
                                attempts.lastFailure());
    sleepUnlessInterrupted(attempts.backoff(Clock::now()), interrupt, where);
  }
}

std::string base64(const char* data, std::size_t size) {
  std::string text(4 * ((size + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                          reinterpret_cast<const unsigned char*>(data), static_cast<int>(size));
  text.resize(static_cast<std::size_t>(n));
  return text;
}

bool fileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::string SshTarget::describe() const {
  std::string out = "host '" + alias + "' (";
  if (address != alias) out += address + " ";
  return out + "port " + std::to_string(port) + ", user " + user + ")";
}

std::string hostKeyFingerprint(LIBSSH2_SESSION* session) {
  const char* hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256);
  if (!hash) return "(unknown)";
  std::string b64 = base64(hash, 32);
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

std::unique_ptr<SshSession> SshSession::connect(const SshTarget& target,
                                                CheckInterrupt* interrupt) {
  initLibssh2Once();
  std::string where = target.describe() + ": ";
  int fd = connectWithTimeout(target, where, interrupt);
  LIBSSH2_SESSION* s = libssh2_session_init();
  if (!s) {
    if (interrupt) interrupt->unwatch(fd);
    ::close(fd);
    throw IoError(where + "libssh2_session_init failed");
  }
  std::unique_ptr<SshSession> session(new SshSession(target, fd, s, interrupt));
  try {
    session->establish();
  } catch (const SshError&) {
    // The interrupt shut the socket down under libssh2: say so rather than libssh2's error.
    if (interrupt && interrupt->interrupted()) throw interrupted(where);
    throw;
  }
  return session;
}

void SshSession::establish() {
  LIBSSH2_SESSION* s = session_;
  const SshTarget& target = target_;
  std::string where = this->where();
  int fd = fd_;
  libssh2_session_set_blocking(s, 1);
  // Every blocking libssh2 call below (handshake, auth, channel setup) shares this bound.
  libssh2_session_set_timeout(s, static_cast<long>(target.connectTimeout.count()));
  std::optional<KnownHosts> known;
  if (target.hostKeyPolicy != HostKeyPolicy::Off) {
    known.emplace(s);
    std::vector<std::string> files = target.userKnownHosts;
    files.insert(files.end(), target.globalKnownHosts.begin(), target.globalKnownHosts.end());
    loadKnownHosts(*known, files);
    preferKnownKeyTypes(*known);
  }
  preferCheapKeyExchange();
  if (int rc = libssh2_session_handshake(s, fd); rc != 0) {
    if (rc == LIBSSH2_ERROR_TIMEOUT)
      throw SshError(SshFailure::Timeout, where + "no SSH greeting within the connect timeout (" +
                                              std::to_string(target.connectTimeout.count()) +
                                              " ms, --ssh-connect-timeout): is this port an sshd?");
    throw SshError(SshFailure::Protocol, where + "ssh handshake failed: " + lastError());
  }
  if (known) verifyHostKey(*known);
  authenticate();
}

void SshSession::stopWatching() {
  if (interrupt_) interrupt_->unwatch(fd_);
  interrupt_ = nullptr;
}

SshSession::~SshSession() {
  stopWatching();
  if (session_) {
    libssh2_session_set_timeout(session_, 2000);
    libssh2_session_disconnect(session_, "hvdrun done");
    libssh2_session_free(session_);
  }
  if (fd_ >= 0) ::close(fd_);
}

std::string SshSession::where() const { return target_.describe() + ": "; }

void SshSession::writeAll(LIBSSH2_CHANNEL* channel, const std::string& data,
                          const std::string& what) {
  for (std::size_t sent = 0; sent < data.size();) {
    ssize_t n = libssh2_channel_write(channel, data.data() + sent, data.size() - sent);
    if (n < 0)
      throw SshError(SshFailure::Protocol, where() + "cannot start " + what + ": " + lastError());
    sent += static_cast<std::size_t>(n);
  }
}

std::string SshSession::lastError() const {
  char* msg = nullptr;
  int len = 0;
  libssh2_session_last_error(session_, &msg, &len, 0);
  return msg && len > 0 ? std::string(msg, len) : "unknown libssh2 error";
}

std::string SshSession::localAddress() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  else
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  return text;
}

std::string keyExchangePreference(const std::vector<std::string>& supported) {
  const std::string first = "ecdh-sha2-nistp256";
  if (std::find(supported.begin(), supported.end(), first) == supported.end()) return "";
  std::string out = first;
  for (const auto& method : supported)
    if (method != first) out.append(",").append(method);
  return out;
}

void SshSession::preferCheapKeyExchange() {
  const char** methods = nullptr;
  int count = libssh2_session_supported_algs(session_, LIBSSH2_METHOD_KEX, &methods);
  if (count <= 0) return;
  std::vector<std::string> supported(methods, methods + count);
  libssh2_free(session_, methods);
  std::string preference = keyExchangePreference(supported);
  if (!preference.empty() &&
      libssh2_session_method_pref(session_, LIBSSH2_METHOD_KEX, preference.c_str()) != 0)
    throw SshError(SshFailure::Protocol, where() + "cannot prefer key exchange methods " +
                                             preference + ": " + lastError());
}

void SshSession::preferKnownKeyTypes(const KnownHosts& known) {
  std::vector<int> types = known.keyTypesFor(target_.address, target_.port);
  if (types.empty()) return;
  const char** algorithms = nullptr;
  int count = libssh2_session_supported_algs(session_, LIBSSH2_METHOD_HOSTKEY, &algorithms);
  if (count <= 0) return;
  std::vector<std::string> supported(algorithms, algorithms + count);
  libssh2_free(session_, algorithms);
  std::string preference = hostKeyAlgorithmPreference(supported, types);
  if (!preference.empty() &&
      libssh2_session_method_pref(session_, LIBSSH2_METHOD_HOSTKEY, preference.c_str()) != 0)
    throw SshError(SshFailure::Protocol, where() + "cannot prefer host key algorithms " +
                                             preference + ": " + lastError());
}

void SshSession::verifyHostKey(const KnownHosts& known) {
  std::size_t keyLen = 0;
  int keyType = 0;
  const char* key = libssh2_session_hostkey(session_, &keyLen, &keyType);
  if (!key) throw SshError(SshFailure::Protocol, where() + "server sent no host key");
  OfferedKey offered{knownHostKeyType(keyType), base64(key, keyLen)};
  OfferedHostKey described{keyTypeName(offered.type), hostKeyFingerprint(session_)};
  HostKeyDecision decision;
  try {
    decision =
        decideHostKey(target_, known.check(target_.address, target_.port, offered), described);
    if (decision.action == HostKeyDecision::Action::Record) {
      std::string line = known.lineFor(target_.address, target_.port, offered);
      try {
        appendKnownHost(target_.userKnownHosts.front(), line);
      } catch (const IoError& e) {
        // As ssh(1) does: the key is accepted for this connection, and the next run checks it
        // again. A read-only ~/.ssh (Kubernetes mounts the key Secret so) must not fail hosts.
        decision.message = "host key " + described.type + " " + described.fingerprint +
                           " accepted but not recorded (" + e.what() +
                           "); it is checked again next time";
      }
    }
  } catch (const IoError& e) {
    throw SshError(SshFailure::Protocol, where() + "cannot check the host key: " + e.what());
  }
  if (decision.action == HostKeyDecision::Action::Refuse)
    throw SshError(decision.failure, where() + decision.message);
  if (!decision.message.empty())
    log::logger("ssh")->warn("{}: {}", target_.alias, decision.message);
}

void SshSession::authenticate() {
  const std::string& user = target_.user;
  char* methods = libssh2_userauth_list(session_, user.c_str(), static_cast<unsigned>(user.size()));
  if (!methods && libssh2_userauth_authenticated(session_)) return;  // "none" was accepted
  std::string offered = methods ? methods : "(none listed)";
  std::vector<std::string> tried;

  if (const std::string& sock = target_.agentSocket; !sock.empty()) {
    std::unique_ptr<LIBSSH2_AGENT, decltype(&libssh2_agent_free)> agent(
        libssh2_agent_init(session_), libssh2_agent_free);
    if (agent) libssh2_agent_set_identity_path(agent.get(), sock.c_str());
    if (agent && libssh2_agent_connect(agent.get()) == 0 &&
        libssh2_agent_list_identities(agent.get()) == 0) {
      libssh2_agent_publickey* identity = nullptr;
      int keys = 0;
      while (libssh2_agent_get_identity(agent.get(), &identity, identity) == 0) {
        ++keys;
        if (libssh2_agent_userauth(agent.get(), user.c_str(), identity) == 0) {
          libssh2_agent_disconnect(agent.get());
          return;
        }
      }
      libssh2_agent_disconnect(agent.get());
      tried.push_back("ssh-agent (" + std::to_string(keys) + " keys, none accepted)");
    } else {
      tried.push_back("ssh-agent (cannot use SSH_AUTH_SOCK=" + sock + ")");
    }
  }
  for (const auto& file : target_.identityFiles) {
    if (!fileExists(file)) continue;
    int rc = libssh2_userauth_publickey_fromfile_ex(
        session_, user.c_str(), static_cast<unsigned>(user.size()), nullptr, file.c_str(), nullptr);
    if (rc == 0) return;
    if (rc == LIBSSH2_ERROR_TIMEOUT)
      throw SshError(SshFailure::Timeout, where() + "timed out during authentication");
    tried.push_back(
        "key " + file + " (" +
        (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED || rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED
             ? std::string("rejected by the server")
             : "unusable: " + lastError()) +
        ")");
  }
  std::string triedText;
  for (const auto& t : tried) triedText += (triedText.empty() ? "" : ", ") + t;
  if (triedText.empty()) triedText = "nothing: no ssh-agent and no identity file found";
  throw SshError(SshFailure::Auth, where() + "authentication failed; tried " + triedText +
                                       "; the server accepts: " + offered +
                                       " (hvdrun never asks for a password)");
}

}  // namespace hvd::launcher::ssh
