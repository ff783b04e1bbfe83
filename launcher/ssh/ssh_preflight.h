// Before any rank starts: connect to every remote host, as many at once as the ConnectSlots
// allow (connect_slots.h), verify and authenticate, and open one channel per rank there, each
// running the check script (remote_command.h: working directory, program, script, interface)
// and then waiting for its run script. All failures are collected into one report, so a
// 16-host job with two bad hosts says so in one go; when there is any, dropping the report
// closes every channel and nothing has started anywhere. The channels of a clean report are
// handed to RemoteRanks, so starting a rank costs one message.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/ssh/connect_slots.h"
#include "launcher/ssh/ssh_session.h"

namespace hvd::launcher::ssh {

// sshd limits the channels of one connection (OpenSSH: MaxSessions, default 10); a host with
// more ranks than this gets further connections.
inline constexpr std::size_t kRanksPerConnection = 8;

struct PreflightHost {
  SshTarget target;
  std::string checkScript;
  std::size_t ranks = 1;
  // Lets another thread stop this host's check at once (an elastic job's new host, checked
  // while hvdrun runs); null: the check runs to its end or its timeout.
  std::shared_ptr<CheckInterrupt> interrupt;
};

// A checked host: its connections and one channel per rank, each waiting for its run script.
// Rank i's channel belongs to sessions[i / kRanksPerConnection]; the channels are freed with
// their sessions.
struct ReadyHost {
  std::vector<std::unique_ptr<SshSession>> sessions;
  std::vector<LIBSSH2_CHANNEL*> channels;
  std::string localAddress;  // this machine's address on the (first) connection
};

struct PreflightReport {
  // One line per failed host, in the order the hosts were given.
  std::vector<std::string> failures;
  // The hosts that passed, by alias.
  std::map<std::string, ReadyHost> ready;
};

// Runs the hosts' checks on min(slots.limit(), hosts) threads (the calling thread is one), each
// taking the next host in order and holding a slot for its check; each step is bounded by its
// target's connect timeout. A host whose interrupt fires while it waits for a slot fails as
// interrupted. Never throws for a host's failure.
PreflightReport preflight(const std::vector<PreflightHost>& hosts, ConnectSlots& slots);

}  // namespace hvd::launcher::ssh
