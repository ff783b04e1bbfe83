// The ranks that run on remote hosts, driven from inside hvdrun. One thread per host owns that
// host's SSH connections and the channels the preflight opened there, one per rank, each with
// its checks done and waiting for its run script (remote_command.h); starting a rank is sending
// that script. A host checked only now (an elastic job's) is checked on its own thread, holding
// one of the ConnectSlots while it does, so at most that many hosts are in an SSH handshake at
// once however many join together. After set-up a host's thread pumps its ranks' output and
// lifelines and otherwise sleeps in poll(); it stays one thread per host because each blocks
// on its own sessions (libssh2 sessions belong to one thread) and a host's stall must not
// delay another's output. A pool of pumps would need every session non-blocking in one poll
// loop, including the blocking script writes and late checks: not worth it for threads that
// sleep. Each rank's stdout and stderr arrive on a socket pair whose read ends the job
// polls like a local worker's pipes; ranks that ended are queued and announced on wakeFd().
// Signalling a rank writes a command on its lifeline: `term` makes the remote script send SIGTERM
// to the rank's process group, `kill` SIGKILL at once. If hvdrun dies, the kernel closes the
// connections, the lifelines end, and the script stops the group (SIGTERM, grace, SIGKILL).
// The decisions of a host's lifecycle (what to do next on which channel, how each rank ends)
// are RemoteHostState's (remote_host_state.h); the host thread performs the I/O it asks for.
// Thread model: the public members are called from the job's thread; each libssh2 session
// belongs to its host's thread alone.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "launcher/exit_status.h"
#include "launcher/rank_assignment.h"
#include "launcher/ssh/ssh_preflight.h"

namespace hvd::launcher {

struct RemoteRankSpec {
  RankPlacement placement;
  int id = 0;          // names the rank in signal() and takeEnded(): its rank, or worker number
  std::string script;  // runScript(...) for this rank
};

struct RemoteRankStreams {
  RankPlacement placement;
  int id = 0;
  int stdoutFd = -1;  // read ends, non-blocking, owned by the caller
  int stderrFd = -1;
};

// Ranks for a host that is checked only now (an elastic job's new host): the host's thread runs
// the preflight, then writes each rank's script, made with this machine's address on the
// connection to the host (what the ranks reach the rendezvous on).
struct LateHost {
  ssh::PreflightHost check;           // check.ranks: ranks.size()
  std::vector<RemoteRankSpec> ranks;  // `script` is left empty and made by scriptFor
  std::function<std::string(const RemoteRankSpec& rank, const std::string& localAddress)> scriptFor;
};

class RemoteRanks {
 public:
  // `sshConcurrency`: how many late hosts may be in their check at once (connect_slots.h).
  explicit RemoteRanks(std::size_t sshConcurrency);
  // Ends every host thread: open channels and connections close, so their lifelines end.
  ~RemoteRanks();
  RemoteRanks(const RemoteRanks&) = delete;
  RemoteRanks& operator=(const RemoteRanks&) = delete;

  // Before start(): a checked host and its ranks, one per channel, in the channels' order.
  void addHost(ssh::ReadyHost host, std::vector<RemoteRankSpec> ranks);
  // Starts one thread per host and returns every rank's streams, in the order added.
  // Throws IoError when the streams cannot be made. A rank whose script cannot be sent ends
  // with status 255 and the reason on its stderr, as ssh does.
  std::vector<RemoteRankStreams> start();

  // At any time, also after start(): starts a thread that checks `host` and then runs its
  // ranks, and returns their streams at once. When the check fails, every one of the ranks ends
  // with ExitStatus::unstarted and the check's report on its stderr.
  std::vector<RemoteRankStreams> launch(LateHost host);

  std::size_t rankCount() const;

  // Readable when ranks have ended since the last takeEnded().
  int wakeFd() const { return wakeRead_; }
  std::vector<std::pair<int, ExitStatus>> takeEnded();
  // Writes the command for `sig` on the rank's lifeline (SIGKILL: `kill`, any other: `term`).
  // The rank is reported when its remote script exits; after SIGKILL, within 2 s even if its
  // host does not answer. A rank whose host is still being checked never starts.
  void signal(int id, int sig);

 private:
  struct Host;
  void report(int id, ExitStatus status);
  std::vector<RemoteRankStreams> openStreams(Host& host);
  void startThread(Host& host);

  ssh::ConnectSlots slots_;  // late hosts' checks; outlives hosts_ (their threads hold slots)
  std::vector<std::unique_ptr<Host>> hosts_;
  int wakeRead_ = -1, wakeWrite_ = -1;
  std::mutex endedMutex_;
  std::vector<std::pair<int, ExitStatus>> ended_;
};

}  // namespace hvd::launcher
