// The local stand-in for one remote rank. hvdrun starts it like a local worker (its own process
// group, output pipes, PR_SET_PDEATHSIG), as `hvdrun --ssh-relay ...`; it connects to the host,
// runs the remote script (remote_command.h) and copies the remote stdout and stderr to its own,
// so the launcher's event loop, output prefixes and failure handling treat local and remote
// ranks alike. SIGTERM/SIGINT/SIGHUP end the remote lifeline, so the remote script stops the
// rank's process group; the relay then exits with the rank's status. If the relay dies, its
// connection drops and the remote side does the same.
// The relay's settings arrive in the environment variable HVD_SSH_RELAY_SPEC (JSON), never on
// its command line, since they contain the job secret.
#pragma once

#include <string>

#include "launcher/ssh/ssh_session.h"

namespace hvd::launcher::ssh {

inline constexpr const char* kRelaySpecVariable = "HVD_SSH_RELAY_SPEC";
inline constexpr const char* kRelayFlag = "--ssh-relay";

struct RelaySpec {
  SshTarget target;
  std::string script;  // runScript(...) for this rank
};

std::string encodeRelaySpec(const RelaySpec& spec);
// Throws InvalidArgument for malformed input.
RelaySpec decodeRelaySpec(const std::string& json);

// The relay's main: reads its spec from the environment and returns its exit status (the remote
// rank's, 255 when the connection failed, as ssh does). May end by raising the signal that
// killed the remote rank, so the launcher reports it the same way as a local one.
int runSshRelay();

}  // namespace hvd::launcher::ssh
