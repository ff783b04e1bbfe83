// hvdrun's side of an elastic job (--min-np, --max-np, --host-discovery-script): decides each
// round's members, publishes the round in the rendezvous store (elastic_rounds.h) and starts and
// stops workers through the Job. A failed worker is replaced on its slot in a new round, where
// the survivors go on from their last commit (the oldest survivor is rank 0, whose state every
// worker takes). A host whose workers keep failing (--blacklist-failure-limit of them with no
// round formed since) or whose SSH check fails is taken out of the job (blacklisted, for good
// or for --blacklist-cooldown-range; its other workers are stopped). When no worker that holds
// the training's state is left, hvdrun says so on its stderr: the job starts over (from the
// on-disk commit of --elastic-commit-dir, if any), or with --elastic-require-progress and no
// such directory fails. Hosts
// the discovery script adds get workers in a new round, which the running workers pick up at
// their next commit. The job fails when fewer than --min-np slots stay usable for
// --elastic-timeout seconds, or after --reset-limit new rounds. A worker that exits 0 ends the
// job's elasticity: no round follows, and the job ends as its workers end. A failure before the
// first round has formed fails the job at once, as in a static job: a replacement would run
// into the same script error. A host that fails its SSH check is blacklisted at any time.
// Thread model: everything runs on the Job's thread (tick, tolerate).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "collectives/rendezvous/elastic_rounds.h"
#include "collectives/rendezvous/store.h"
#include "launcher/elastic_membership.h"
#include "launcher/host_blacklist.h"
#include "launcher/job.h"

namespace hvd::launcher {

struct ElasticOptions {
  int minNp = 1;
  int maxNp = -1;  // -1: no cap
  std::chrono::seconds timeout{600};
  int resetLimit = -1;                    // -1: no limit
  std::optional<CooldownRange> cooldown;  // --blacklist-cooldown-range; none: for good
  int hostFailureLimit = 3;               // --blacklist-failure-limit
  bool requireProgress = false;           // --elastic-require-progress
  std::string commitDir;                  // --elastic-commit-dir; empty: none
};

// Where usable hosts come from: the discovery script, or the fixed -H/--hostfile list.
using HostSource = std::function<std::vector<HostSlots>()>;

// How a round's workers are started (elastic_workers.h): on this machine as child processes, on
// other hosts over SSH.
class WorkerStarter {
 public:
  virtual ~WorkerStarter() = default;
  // For a round of `members`: the addresses to publish with it (elastic_rounds.h).
  virtual rendezvous::elastic::HostAddresses addresses(
      const rendezvous::elastic::Members& members) = 0;
  // Starts the new workers, id -> placement in their first round, in `job`; each worker's
  // output label is its id.
  virtual void start(Job& job, const rendezvous::elastic::Members& added) = 0;
};

class ElasticDriver : public JobPolicy {
 public:
  // `fixedHosts`: the source never changes (no discovery script).
  ElasticDriver(ElasticOptions options, HostSource hosts, bool fixedHosts, WorkerStarter& starter,
                rendezvous::Store& store, std::string jobId);

  void tick(Job& job) override;
  bool tolerate(Job& job, int label, const std::string& host, const ExitStatus& status) override;
  bool waiting() const override { return !finishing_ && !failed_; }

 private:
  std::vector<HostSlots> usableHosts();
  bool roundFormed();
  bool everyoneAsksForNewRound();
  void publish(Job& job, const MembershipChange& change);
  void failJob(Job& job, const std::string& reason);
  // The current round formed: its members hold the state, its hosts' failure counts restart.
  void markFormed();
  // Takes `host` out of the job and stops its other workers.
  void blacklist(Job& job, const std::string& host);
  // Whether a member that holds the training's state (it was in a round that formed) is left.
  bool stateSurvives() const;

  ElasticOptions options_;
  HostSource hosts_;
  bool fixedHosts_;
  WorkerStarter& starter_;
  rendezvous::Store& store_;
  std::string jobId_;

  std::vector<ElasticWorker> members_;              // the current round's live members
  std::set<int> trained_;                           // members that were in a round that formed
  std::map<std::string, int> failuresSinceFormed_;  // host -> its workers' failures
  std::vector<std::string> hostOrder_;              // hosts by first appearance
  HostBlacklist blacklist_;
  int64_t round_ = -1;
  int nextId_ = 0;
  int resets_ = 0;
  bool forced_ = false;     // a member failed: the next round cannot wait for this one to form
  bool started_ = false;    // a round has formed (every member joined it)
  bool finishing_ = false;  // a worker exited 0
  bool failed_ = false;
  std::string lastFailure_;
  std::chrono::steady_clock::time_point shortSince_{};  // fewer than --min-np slots since
};

}  // namespace hvd::launcher
