// The part of OpenSSH's client configuration (~/.ssh/config, then /etc/ssh/ssh_config) that
// hvdrun honours: Host blocks
// with their patterns (`*`, `?`, `!negation`), and the HostName, User, Port, IdentityFile,
// StrictHostKeyChecking, UserKnownHostsFile and GlobalKnownHostsFile keywords. As in ssh(1),
// the first value found for a keyword wins, keywords are case-insensitive and may be written
// `Key value` or `Key=value`; IdentityFile accumulates; the known-hosts keywords take several
// files, or `none`.
// Other keywords are ignored (hvdrun is not ssh); `Match` blocks are skipped, not evaluated.
// Pure: no I/O except loadSshConfig.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/ssh/host_key_policy.h"

namespace hvd::launcher::ssh {

struct SshHostConfig {
  std::string hostName;  // empty: connect to the alias itself
  std::string user;
  std::optional<int> port;
  std::vector<std::string> identityFiles;  // "~/" expanded against `home`
  std::optional<HostKeyPolicy> strictHostKeyChecking;
  // Unset: the defaults; set but empty: `none`. "~/" expanded.
  std::optional<std::vector<std::string>> userKnownHostsFiles;
  std::optional<std::vector<std::string>> globalKnownHostsFiles;
};

// Settings for `host` from the config text; `path` names the file in errors. Throws
// InvalidArgument naming the file and line for a malformed Port or StrictHostKeyChecking.
SshHostConfig lookupSshConfig(const std::string& text, const std::string& path,
                              const std::string& host, const std::string& home);

// `*` and `?` glob matching as ssh_config(5) defines it for Host patterns.
bool hostPatternMatches(const std::string& pattern, const std::string& host);

// Reads `path` (a missing file is an empty config) and looks `host` up.
SshHostConfig loadSshConfig(const std::string& path, const std::string& host,
                            const std::string& home);

// One config out of the user's (~/.ssh/config) and the system's (/etc/ssh/ssh_config), read in
// that order as ssh(1) does: what `first` sets wins, `later` fills the rest; IdentityFiles add
// up, `first`'s first.
SshHostConfig mergeSshConfig(SshHostConfig first, const SshHostConfig& later);

// Where the system-wide client config is.
inline constexpr const char* kSystemSshConfig = "/etc/ssh/ssh_config";

}  // namespace hvd::launcher::ssh
