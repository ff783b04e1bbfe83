#include "launcher/ssh/host_key_policy.h"

#include <algorithm>
#include <cctype>

namespace hvd::launcher::ssh {

std::optional<HostKeyPolicy> parseHostKeyPolicy(const std::string& value) {
  std::string v = value;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "yes" || v == "true" || v == "ask") return HostKeyPolicy::Strict;
  if (v == "accept-new") return HostKeyPolicy::AcceptNew;
  if (v == "no" || v == "off" || v == "false") return HostKeyPolicy::Off;
  return std::nullopt;
}

const char* hostKeyPolicyName(HostKeyPolicy policy) {
  switch (policy) {
    case HostKeyPolicy::Strict:
      return "yes";
    case HostKeyPolicy::AcceptNew:
      return "accept-new";
    case HostKeyPolicy::Off:
      return "no";
  }
  return "?";
}

}  // namespace hvd::launcher::ssh
