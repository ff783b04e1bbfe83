// What hvdrun does with the key a host offered, given what its known_hosts files say and the
// target's policy; and which host key algorithms to ask the host for. Pure: SshSession reads the
// files, appends the line and throws.
//
// Fail closed, as OpenSSH does: a changed key, a key of a type the files do not list for a host
// they do list, and a revoked key are refused whatever the policy (except "no", which checks
// nothing). Only a host the files do not list at all is accepted (and recorded) under
// accept-new. OpenSSH asks the host for the key types known_hosts lists first
// (hostKeyAlgorithmPreference does the same), so a host offering several keys is checked against
// the one recorded; it asks the user when the host offers none of them; hvdrun cannot ask and
// refuses.
#pragma once

#include <string>
#include <vector>

#include "launcher/ssh/known_hosts.h"
#include "launcher/ssh/ssh_session.h"

namespace hvd::launcher::ssh {

struct OfferedHostKey {
  std::string type;         // "ssh-rsa"
  std::string fingerprint;  // "SHA256:..."
};

struct HostKeyDecision {
  enum class Action {
    Accept,  // known (or recording impossible: message says why, to log as a warning)
    Record,  // unknown under accept-new: append the line to target.userKnownHosts.front()
    Refuse,  // throw SshError(failure, where + message)
  };
  Action action = Action::Accept;
  SshFailure failure = SshFailure::Protocol;
  std::string message;
};

// `target.hostKeyPolicy` must not be Off (nothing is checked then).
HostKeyDecision decideHostKey(const SshTarget& target, const KnownHostsVerdict& verdict,
                              const OfferedHostKey& offered);

// The known_hosts name of the target: "[address]:port", or the address on port 22.
std::string knownHostsName(const SshTarget& target);

// libssh2's host key algorithms `supported` (its order, from libssh2_session_supported_algs)
// with those of `knownTypes` (LIBSSH2_KNOWNHOST_KEY_*) moved to the front, comma-separated for
// libssh2_session_method_pref. Certificate algorithms never count as known (a plain known_hosts
// key cannot match a certificate). Empty when no known type is supported: keep the default.
std::string hostKeyAlgorithmPreference(const std::vector<std::string>& supported,
                                       const std::vector<int>& knownTypes);

}  // namespace hvd::launcher::ssh
