// How hvdrun reaches each remote host: SSH settings from the flags, ~/.ssh/config and the
// defaults, and the network interface a host's ranks use. Pure apart from reading
// ~/.ssh/config.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "launcher/host_spec.h"
#include "launcher/ssh/ssh_session.h"
#include "launcher/worker_env.h"

namespace hvd::launcher {

struct SshOptions {
  int port = 0;              // --ssh-port; 0: from ~/.ssh/config, else 22
  std::string identityFile;  // --ssh-identity-file; tried before the config's and defaults
  std::chrono::seconds connectTimeout{10};
  int concurrency = 0;  // --ssh-concurrency; 0: HVD_SSH_CONCURRENCY (sshConcurrency())
  // --ssh-strict-host-key-checking (--ssh-no-host-key-check is `no`); unset: the host's
  // StrictHostKeyChecking in ~/.ssh/config, else accept-new.
  std::optional<ssh::HostKeyPolicy> hostKeyPolicy;
};

// Precedence, as in ssh(1): user@host and the flags, then ~/.ssh/config (HOME from `env`),
// then defaults (the current user, port 22, ~/.ssh/id_{ed25519,ecdsa,rsa}, accept-new,
// ~/.ssh/known_hosts{,2} and /etc/ssh/ssh_known_hosts{,2}). Throws InvalidArgument when
// --ssh-identity-file does not exist or ~/.ssh/config is malformed.
ssh::SshTarget sshTargetFor(const HostSlots& host, const SshOptions& options,
                            const Environment& env);

// How many hosts to connect to and check at once (ssh/connect_slots.h): --ssh-concurrency,
// else HVD_SSH_CONCURRENCY from `env` (hvdrun's environment), else its default. Throws
// InvalidArgument for a malformed value, naming the variable.
std::size_t sshConcurrency(const SshOptions& options, const Environment& env);

// --network-interface: "IFACE" (every host) or "host=IFACE[,host=IFACE...]". Returns host ->
// interface, with key "" for every host. Throws InvalidArgument naming an entry that is
// malformed or names a host not in the job.
std::map<std::string, std::string> parseNetworkInterfaces(const std::string& spec,
                                                          const std::vector<HostSlots>& hosts);
// The interface for `host`, or "" for automatic.
std::string interfaceFor(const std::map<std::string, std::string>& interfaces,
                         const std::string& host);

}  // namespace hvd::launcher
