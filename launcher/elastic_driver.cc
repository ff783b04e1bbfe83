#include "launcher/elastic_driver.h"

#include <algorithm>
#include <cstdio>

#include "collectives/rendezvous/elastic_rounds.h"
#include "common/error.h"
#include "common/logging.h"

namespace hvd::launcher {

namespace elastic = rendezvous::elastic;
using Clock = std::chrono::steady_clock;

ElasticDriver::ElasticDriver(ElasticOptions options, HostSource hosts, bool fixedHosts,
                             WorkerStarter& starter, rendezvous::Store& store, std::string jobId)
    : options_(options),
      hosts_(std::move(hosts)),
      fixedHosts_(fixedHosts),
      starter_(starter),
      store_(store),
      jobId_(std::move(jobId)),
      blacklist_(options_.cooldown) {}

std::vector<HostSlots> ElasticDriver::usableHosts() {
  std::vector<HostSlots> usable;
  for (const auto& h : hosts_()) {
    if (blacklist_.blocked(h.host, Clock::now())) continue;
    if (std::find(hostOrder_.begin(), hostOrder_.end(), h.host) == hostOrder_.end())
      hostOrder_.push_back(h.host);
    usable.push_back(h);
  }
  std::stable_sort(usable.begin(), usable.end(), [&](const HostSlots& a, const HostSlots& b) {
    return std::find(hostOrder_.begin(), hostOrder_.end(), a.host) <
           std::find(hostOrder_.begin(), hostOrder_.end(), b.host);
  });
  return usable;
}

// Every member has joined the current round: its communicators are up (or about to be), and a
// new round now cannot leave some members connecting in the old one. (Members that joined and
// then failed still count, but a failure forces the next round without this check.)
bool ElasticDriver::roundFormed() {
  return elastic::joinedCount(store_, jobId_, round_) >= static_cast<int64_t>(members_.size());
}

// Every member finished the current round and waits for the next (they all reset together,
// with no change of members).
bool ElasticDriver::everyoneAsksForNewRound() {
  return !members_.empty() &&
         elastic::askingCount(store_, jobId_, round_) >= static_cast<int64_t>(members_.size());
}

void ElasticDriver::tick(Job& job) {
  if (finishing_ || failed_) return;
  if (!forced_ && round_ >= 0) {
    if (roundFormed())
      markFormed();
    else if (planMembership(members_, usableHosts(), options_.maxNp).remove.empty())
      return;
    // Else a member's host left the discovery while the round formed (a deleted pod): that
    // member never joins, and waiting would hold the others until its start fails.
  }
  for (const auto& host : blacklist_.takeReturned(Clock::now()))
    log::logger("launcher")
        ->info(
            "elastic: host {}'s blacklist cooldown is over; its slots are "
            "offered again",
            host);
  std::vector<HostSlots> offered = usableHosts();
  MembershipChange change = planMembership(members_, offered, options_.maxNp);
  if (!change.changed() && !forced_) {
    if (everyoneAsksForNewRound()) publish(job, change);
    return;
  }
  if (static_cast<int>(change.size()) < options_.minNp) {
    auto log = log::logger("launcher");
    int usable = 0;
    for (const auto& h : offered) usable += h.slots;
    std::string names = blacklist_.describe(Clock::now());
    std::string why = detail::concat(
        usable, " usable slots (", offered.empty() ? "none" : describeHosts(offered),
        names.empty() ? "" : "; blacklisted: ", names, ") but --min-np ", options_.minNp);
    // A fixed list gets no new hosts; its blacklisted ones may come back after their cooldown.
    if (fixedHosts_ && !blacklist_.coolsDown())
      return failJob(job, why + " and the host list is fixed (no --host-discovery-script)" +
                              (lastFailure_.empty() ? "" : "; last failure: " + lastFailure_));
    if (shortSince_ == Clock::time_point{}) {
      shortSince_ = Clock::now();
      log->warn(
          "elastic: {}; waiting up to {} s for {}", why, options_.timeout.count(),
          fixedHosts_ ? "blacklisted hosts to come back" : "the discovery script to offer more");
    } else if (Clock::now() - shortSince_ > options_.timeout) {
      return failJob(
          job, detail::concat(why, " for ", options_.timeout.count(), " s (--elastic-timeout)",
                              lastFailure_.empty() ? "" : "; last failure: ", lastFailure_));
    }
    return;
  }
  shortSince_ = {};
  publish(job, change);
}

void ElasticDriver::publish(Job& job, const MembershipChange& change) {
  auto log = log::logger("launcher");
  if (round_ >= 0) {
    if (options_.resetLimit >= 0 && resets_ >= options_.resetLimit)
      return failJob(job,
                     detail::concat("the job needs a new round (", change.size(),
                                    " workers) but reached --reset-limit ", options_.resetLimit));
    ++resets_;
  }
  for (const auto& w : change.remove) {
    log->warn("elastic: stopping worker {} on {} (its slot is no longer offered)", w.id,
              w.where.host);
    job.stopWorker(w.id);
  }
  std::vector<ElasticWorker> members = change.keep;
  std::vector<ElasticWorker> added;
  for (const auto& slot : change.add) added.push_back({nextId_++, slot});
  members.insert(members.end(), added.begin(), added.end());
  auto placements = placeMembers(members);
  ++round_;
  // Published before the new workers start: their first init reads the newest round, which
  // must already hold them.
  elastic::publishRound(store_, jobId_, round_, placements, starter_.addresses(placements));
  members_ = members;
  forced_ = false;
  std::string text;
  for (const auto& [id, p] : placements)
    text += detail::concat(text.empty() ? "" : ", ", id, "->", p.rank, "@", p.hostname);
  log->info("elastic: round {}: {} workers (worker->rank@host: {})", round_, placements.size(),
            text);
  elastic::Members fresh;
  for (const auto& w : added) fresh[w.id] = placements.at(w.id);
  starter_.start(job, fresh);
}

bool ElasticDriver::tolerate(Job& job, int label, const std::string& host,
                             const ExitStatus& status) {
  auto member = std::find_if(members_.begin(), members_.end(),
                             [&](const ElasticWorker& w) { return w.id == label; });
  if (!status.failed()) {
    if (!finishing_ && member != members_.end())
      log::logger("launcher")->info("elastic: worker {} finished; no new round follows", label);
    finishing_ = finishing_ || member != members_.end();
    if (member != members_.end()) members_.erase(member);
    return true;
  }
  if (finishing_) return false;  // the job was ending: a failure now is the job's failure
  // Before the first round formed, a failure is the script's (an import error, a bad argument)
  // far more often than the host's, and a replacement would fail the same way.
  // A host that failed its SSH check is at fault whenever that happens. The round may have
  // formed since the last tick: a worker that trains a few quick steps and dies before it was
  // the host's failure, not the script's.
  if (!started_ && round_ >= 0 && roundFormed()) markFormed();
  if (!started_ && !status.unstarted) return false;
  if (member == members_.end()) return true;  // already out of the job
  lastFailure_ = detail::concat("worker ", label, " on ", host, " ", status.describe());
  members_.erase(member);
  int failures = ++failuresSinceFormed_[host];
  if (status.unstarted || failures >= options_.hostFailureLimit) {
    blacklist(job, host);
  } else {
    log::logger("launcher")
        ->warn("elastic: {}; replacing it ({} of --blacklist-failure-limit {} on {})", lastFailure_,
               failures, options_.hostFailureLimit, host);
  }
  if (!stateSurvives()) {
    trained_.clear();
    if (options_.requireProgress && options_.commitDir.empty()) {
      failJob(job, "all workers lost (the last: " + lastFailure_ +
                       "): no worker holds the training's state, and --elastic-require-progress "
                       "forbids starting over (--elastic-commit-dir would keep it on disk)");
      return true;
    }
    // Said on stderr whatever the log level: the job goes on, but its progress is gone.
    std::string from = options_.commitDir.empty()
                           ? "the beginning"
                           : "the last on-disk commit in " + options_.commitDir;
    ::fprintf(stderr,
              "hvdrun: elastic: all workers lost (the last: %s): no worker holds the "
              "training's state; training restarts from %s\n",
              lastFailure_.c_str(), from.c_str());
  }
  forced_ = true;
  tick(job);
  return true;
}

void ElasticDriver::markFormed() {
  started_ = true;
  for (const auto& w : members_) trained_.insert(w.id);
  failuresSinceFormed_.clear();
}

void ElasticDriver::blacklist(Job& job, const std::string& host) {
  auto out = blacklist_.add(host, Clock::now());
  failuresSinceFormed_.erase(host);
  log::logger("launcher")
      ->warn("elastic: {}; blacklisting host {} {}and going on without it", lastFailure_, host,
             out ? detail::concat("for ", out->count(), " s ") : "");
  for (auto it = members_.begin(); it != members_.end();) {
    if (it->where.host == host) {
      job.stopWorker(it->id);
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

bool ElasticDriver::stateSurvives() const {
  if (trained_.empty()) return true;  // nothing trained yet: nothing to lose
  for (const auto& w : members_)
    if (trained_.count(w.id)) return true;
  return false;
}

void ElasticDriver::failJob(Job& job, const std::string& reason) {
  failed_ = true;
  job.fail("elastic: " + reason);
}

}  // namespace hvd::launcher
