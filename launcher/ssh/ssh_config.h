// The part of OpenSSH's client configuration (~/.ssh/config) that hvdrun honours: Host blocks
// with their patterns (`*`, `?`, `!negation`), and the HostName, User, Port and IdentityFile
// keywords. As in ssh(1), the first value found for a keyword wins, keywords are
// case-insensitive and may be written `Key value` or `Key=value`; IdentityFile accumulates.
// Other keywords are ignored (hvdrun is not ssh); `Match` blocks are skipped, not evaluated.
// Pure: no I/O except loadSshConfig.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hvd::launcher::ssh {

struct SshHostConfig {
  std::string hostName;  // empty: connect to the alias itself
  std::string user;
  std::optional<int> port;
  std::vector<std::string> identityFiles;  // "~/" expanded against `home`
};

// Settings for `host` from the config text; `path` names the file in errors. Throws
// InvalidArgument naming the file and line for a malformed Port.
SshHostConfig lookupSshConfig(const std::string& text, const std::string& path,
                              const std::string& host, const std::string& home);

// `*` and `?` glob matching as ssh_config(5) defines it for Host patterns.
bool hostPatternMatches(const std::string& pattern, const std::string& host);

// Reads `path` (a missing file is an empty config) and looks `host` up.
SshHostConfig loadSshConfig(const std::string& path, const std::string& host,
                            const std::string& home);

}  // namespace hvd::launcher::ssh
