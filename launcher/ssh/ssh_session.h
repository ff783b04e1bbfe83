// One SSH connection to one host through libssh2 (no `ssh` binary): TCP connect with a timeout,
// handshake, host key verification against the known_hosts files (known_hosts.h,
// host_key_check.h), and key authentication (ssh-agent, then
// identity files; never a password prompt). Channels are opened on raw() by the preflight.
// Failures throw SshError whose kind() says which step failed, so the preflight can group them;
// every message names the host, port and user.
// Thread model: a session belongs to one thread at a time; sessions on different threads are
// independent (libssh2 is initialised once, process-wide).
#pragma once

#include <libssh2.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "launcher/ssh/check_interrupt.h"
#include "launcher/ssh/host_key_policy.h"

namespace hvd::launcher::ssh {

class KnownHosts;

struct SshTarget {
  std::string alias;    // the host as the user wrote it, for messages
  std::string address;  // what to connect to (ssh_config HostName, else the alias)
  int port = 22;
  std::string user;
  std::string agentSocket;                 // ssh-agent's socket (SSH_AUTH_SOCK); empty: none
  std::vector<std::string> identityFiles;  // tried in order after the agent
  // Files read for the host key check; a new key is appended to the first user file only
  // (the global ones, /etc/ssh/ssh_known_hosts by default, are never written). Missing files
  // hold nothing.
  std::vector<std::string> userKnownHosts;
  std::vector<std::string> globalKnownHosts;
  HostKeyPolicy hostKeyPolicy = HostKeyPolicy::AcceptNew;
  // Where the policy came from, for messages: "--ssh-strict-host-key-checking yes", ...
  std::string hostKeyPolicySource = "the default";
  std::chrono::milliseconds connectTimeout{10000};

  // "host 'node1' (10.0.0.2 port 22, user alice)"
  std::string describe() const;
};

enum class SshFailure {
  Resolve,         // the name does not resolve
  Refused,         // nothing listens on the port
  Timeout,         // no answer within the connect timeout
  Unreachable,     // no route, network down
  Protocol,        // handshake or channel failure, connection dropped
  HostKeyUnknown,  // not in known_hosts under Strict
  HostKeyChanged,  // known_hosts has a different key, or only keys of other types: possible
                   // man-in-the-middle
  HostKeyRevoked,  // the key is on an @revoked line
  Auth,            // no method was accepted
  Interrupted,     // hvdrun stopped while the check waited (CheckInterrupt)
};

class SshError : public Error {
 public:
  SshError(SshFailure kind, const std::string& what) : Error(what), kind_(kind) {}
  SshFailure kind() const { return kind_; }

 private:
  SshFailure kind_;
};

// The key exchange methods to offer, from libssh2's `supported` list (its own preference
// order): ECDH on NIST P-256 first, the rest as they were. An OpenSSH server computes P-256
// with OpenSSL's assembly but curve25519 with its own portable code, which costs the server
// more CPU per login (docs/cluster.md quotes it). A server
// that does not offer P-256 negotiates the next method, as before. Empty when libssh2 lacks it.
std::string keyExchangePreference(const std::vector<std::string>& supported);

class SshSession {
 public:
  // Connects, verifies the host key and authenticates. Throws SshError. With `interrupt`, the
  // socket stays registered there (and the session's waits stop when it fires) until
  // stopWatching() or the session's end.
  static std::unique_ptr<SshSession> connect(const SshTarget& target,
                                             CheckInterrupt* interrupt = nullptr);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const SshTarget& target() const { return target_; }
  // The check is over: the session goes on to run a rank, out of the interrupt's reach.
  void stopWatching();
  LIBSSH2_SESSION* raw() const { return session_; }
  int socket() const { return fd_; }
  // This side's address of the connection: an address of this machine the host can reach.
  std::string localAddress() const;

  // The SshError message prefix for this target, e.g. "host 'a' (a port 22, user u): ".
  std::string where() const;
  // libssh2's message for the session's last failure.
  std::string lastError() const;
  // Writes all of `data` to the channel's stdin (blocking, bounded by the session's timeout).
  // Throws SshError naming `what` ("the check", "the rank").
  void writeAll(LIBSSH2_CHANNEL* channel, const std::string& data, const std::string& what);

 private:
  SshSession(SshTarget target, int fd, LIBSSH2_SESSION* session, CheckInterrupt* interrupt)
      : target_(std::move(target)), fd_(fd), session_(session), interrupt_(interrupt) {}
  void establish();  // handshake, host key, authentication
  // Before the handshake: ask for the key types the files list for this host first.
  void preferKnownKeyTypes(const KnownHosts& known);
  // Before the handshake: keyExchangePreference.
  void preferCheapKeyExchange();
  void verifyHostKey(const KnownHosts& known);
  void authenticate();

  SshTarget target_;
  int fd_ = -1;
  LIBSSH2_SESSION* session_ = nullptr;
  CheckInterrupt* interrupt_ = nullptr;
};

// "SHA256:base64" of the host key the session was offered, as ssh-keygen -l prints it.
std::string hostKeyFingerprint(LIBSSH2_SESSION* session);

}  // namespace hvd::launcher::ssh
