// Before any rank starts: connect to every remote host at once, verify and authenticate, and run
// a check script there (remote_command.h: working directory, program, script, interface). All
// failures are collected into one report, so a 16-host job with two bad hosts says so in one go.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/ssh/ssh_session.h"

namespace hvd::launcher::ssh {

struct PreflightHost {
  SshTarget target;
  std::string checkScript;
};

struct PreflightReport {
  // One line per failed host, in the order the hosts were given.
  std::vector<std::string> failures;
  // For each host that passed: this machine's address on the connection to it.
  std::map<std::string, std::string> localAddressByHost;
};

// Runs every check on its own thread; each is bounded by its target's connect timeout (plus
// the same again for the check script). Never throws for a host's failure.
PreflightReport preflight(const std::vector<PreflightHost>& hosts);

}  // namespace hvd::launcher::ssh
