// What hvdrun does with a host key known_hosts does not vouch for: the three values of
// --ssh-strict-host-key-checking and of ssh_config's StrictHostKeyChecking. Pure.
#pragma once

#include <optional>
#include <string>

namespace hvd::launcher::ssh {

enum class HostKeyPolicy {
  AcceptNew,  // "accept-new" (default): an unknown host's key is appended to the user's
              // known_hosts with a warning; changed keys and other key types are refused
  Strict,     // "yes": unknown hosts are refused too
  Off,        // "no" (--ssh-no-host-key-check): no check at all, nothing recorded
};

// StrictHostKeyChecking's values as ssh_config(5) spells them, any case: yes, accept-new, no,
// and OpenSSH's synonyms off and true/false. "ask" counts as yes: hvdrun never prompts, which
// is what ssh does with ask when it cannot ask. nullopt for anything else.
std::optional<HostKeyPolicy> parseHostKeyPolicy(const std::string& value);

// "yes", "accept-new" or "no".
const char* hostKeyPolicyName(HostKeyPolicy policy);

}  // namespace hvd::launcher::ssh
