#include "runtime/engine/coordinator.h"

#include <algorithm>

#include "common/error.h"
#include "common/format.h"
#include "runtime/engine/fusion.h"
#include "runtime/engine/host_layout.h"
#include "runtime/engine/inline_allreduce.h"

namespace hvd::runtime {
namespace {

std::vector<int32_t> iota(int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

double secondsBetween(SteadyTime a, SteadyTime b) {
  return std::chrono::duration<double>(b - a).count();
}

// Adding and removing a process set involves every rank, whatever set the request names.
bool involvesEveryRank(OpType t) {
  return t == OpType::AddProcessSet || t == OpType::RemoveProcessSet;
}

}  // namespace

std::string describeByRank(const std::map<int, std::string>& valueByRank) {
  std::vector<std::pair<std::string, std::set<int>>> groups;
  for (const auto& entry : valueByRank) {
    const auto& [rank, value] = entry;
    // (clang before 16 cannot capture a structured binding.)
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&entry](const auto& g) { return g.first == entry.second; });
    if (it == groups.end())
      groups.push_back({value, {rank}});
    else
      it->second.insert(rank);
  }
  std::string out;
  for (const auto& [value, ranks] : groups) {
    if (!out.empty()) out += ", ";
    out += (ranks.size() > 1 ? "ranks " : "rank ") + rankSet(ranks) + " " + value;
  }
  return out;
}

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(options), cache_(options.cacheCapacity) {
  processSets_[0] = iota(options_.size);
}

const std::vector<int32_t>& Coordinator::processSet(int32_t id) const {
  static const std::vector<int32_t> kNone;
  auto it = processSets_.find(id);
  return it == processSets_.end() ? kNone : it->second;
}

void Coordinator::submitList(int rank, const RequestList& list, SteadyTime now) {
  // What every rank has seen is taken once per dispatch (forgetting evictions later is safe):
  // here, per list, it would cost O(N) per rank and O(N^2) per cycle.
  seenByRank_[rank] = list.responseListsSeen;
  for (const auto& s : list.submissions)
    submit(rank, s.cacheId ? cache_.resolve(s.cacheId) : s.request, s.cacheId, now, s.inlineData);
  if (list.shutdown) requestShutdown(rank);
}

std::vector<int> Coordinator::Pending::submitters() const {
  std::vector<int> out;
  out.reserve(submittedCount);
  for (int r = 0; r < static_cast<int>(state.size()); ++r)
    if (state[r] & kSubmitted) out.push_back(r);
  return out;
}

const OpRequest& Coordinator::Pending::requestOf(int rank) const {
  auto it = differing.find(rank);
  return it == differing.end() ? request : it->second;
}

void Coordinator::expect(Pending& p, int rank) {
  if (!(p.state[rank] & Pending::kExpected)) {
    p.state[rank] |= Pending::kExpected;
    ++p.expectedCount;
  }
}

void Coordinator::submit(int rank, const OpRequest& request, uint64_t cacheId, SteadyTime now,
                         std::string inlineData) {
  HVD_ENFORCE(rank >= 0 && rank < options_.size, "rank ", rank, " submitted ", request.describe(),
              " but the job has ", options_.size, " ranks");
  if (request.type == OpType::Join) {
    joined_.insert(rank);
    lastJoined_ = rank;
    for (auto& [name, p] : pending_) markIfReady(name, p, now);
    return;
  }
  // A name in the global set is its own key: no key string is built for it.
  std::string scoped;
  const std::string& key = request.processSet == 0 ? request.name : (scoped = request.key());
  auto [it, fresh] = pending_.try_emplace(key);
  Pending& p = it->second;
  if (fresh) {
    p.firstSeen = now;
    p.request = request;
    p.cacheId = cacheId;
    p.state.assign(options_.size, 0);
  } else {
    HVD_ENFORCE(!p.submitted(rank), "rank ", rank, " submitted ", request.describe(),
                " twice before it ran");
    // Ranks that sent the same cache id sent identical requests.
    bool same = (cacheId != 0 && cacheId == p.cacheId) || request == p.request;
    if (!same) p.differing.emplace(rank, request);
  }
  p.state[rank] |= Pending::kSubmitted;
  ++p.submittedCount;
  if (!inlineData.empty()) p.inlineByRank[rank] = std::move(inlineData);
  // The ranks it waits for: those of each process set a submission names, added once per set
  // (a set other than the first is a mismatch, reported when all have arrived), not per
  // submission, which made a cycle O(N^2) in the ranks.
  int32_t set = involvesEveryRank(request.type) ? 0 : request.processSet;
  if (std::find(p.setsExpected.begin(), p.setsExpected.end(), set) == p.setsExpected.end()) {
    p.setsExpected.push_back(set);
    for (int32_t r : processSet(set)) expect(p, r);
  }
  expect(p, rank);
  markIfReady(it->first, p, now);
}

void Coordinator::requestShutdown(int rank) { shutdownRequested_.insert(rank); }

void Coordinator::failWhatShutDownRanksWillNeverSubmit(std::vector<Response>& out) {
  if (shutdownRequested_.empty()) return;
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::set<int> gone;
    for (int rank : missing(it->second))
      if (shutdownRequested_.count(rank)) gone.insert(rank);
    if (gone.empty()) {
      ++it;
      continue;
    }
    Response r;
    r.kind = ResponseKind::Error;
    r.type = it->second.request.type;
    r.names = {it->first};
    r.message = detail::concat(it->second.request.describe(), ": ranks ", rankSet(gone),
                               onHosts(options_.hostOfRank, gone),
                               " shut down (their program finished or called "
                               "shutdown) without submitting it, so it can never run");
    out.push_back(std::move(r));
    it = pending_.erase(it);
  }
}

void Coordinator::failJoinThatCanNeverComplete(std::vector<Response>& out) {
  if (joined_.empty()) return;
  std::set<int> gone;
  for (int rank : shutdownRequested_)
    if (!joined_.count(rank)) gone.insert(rank);
  if (gone.empty()) return;
  Response r;
  r.kind = ResponseKind::Error;
  r.type = OpType::Join;
  r.message = detail::concat("join: ranks ", rankSet(gone), onHosts(options_.hostOfRank, gone),
                             " shut down (their program finished or called shutdown) without "
                             "joining, so the join of ranks ",
                             rankSet(joined_), " can never complete");
  out.push_back(std::move(r));
  joined_.clear();
  lastJoined_ = -1;
}

namespace {

// The synchronous operations: a rank that submitted one waits in it, so it submits nothing
// else until it completes (from the thread that called it: hvd's contract for these).
bool isFence(OpType t) {
  return t == OpType::Barrier || t == OpType::AddProcessSet || t == OpType::RemoveProcessSet;
}

}  // namespace

void Coordinator::failFencesThatCanNeverMatch(std::vector<Response>& out) {
  // Each rank's pending fence; a rank with two (several threads) is not judged.
  std::map<int, std::string> fenceOf;
  std::set<int> undecided;
  std::set<std::string> stuck;
  for (const auto& [name, p] : pending_) {
    if (p.ready || !isFence(p.request.type)) continue;
    stuck.insert(name);
    for (int rank : p.submitters())
      if (!fenceOf.emplace(rank, name).second) undecided.insert(rank);
  }
  if (stuck.empty()) return;
  // A fence can still complete when a rank it waits for is free, or waits in a fence that can
  // still complete: drop those until none changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = stuck.begin(); it != stuck.end();) {
      bool free = false;
      for (int rank : missing(pending_.at(*it))) {
        auto f = fenceOf.find(rank);
        free |= f == fenceOf.end() || undecided.count(rank) || !stuck.count(f->second);
      }
      if (free) {
        it = stuck.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  if (stuck.empty()) return;
  std::string sides;
  for (const auto& name : stuck) {
    const Pending& p = pending_.at(name);
    auto submitted = p.submitters();
    std::set<int> ranks(submitted.begin(), submitted.end());
    sides += detail::concat(sides.empty() ? "" : "; ", "ranks ", rankSet(ranks), " wait in ",
                            p.request.describe());
  }
  std::string message = detail::concat(
      "the ranks called different synchronous operations at the same point, so none of them "
      "can ever complete: ",
      sides,
      " (every rank must call barrier, add_process_set and "
      "remove_process_set in the same order)");
  for (const auto& name : stuck) {
    Response r;
    r.kind = ResponseKind::Error;
    r.type = pending_.at(name).request.type;
    r.names = {name};
    r.message = message;
    out.push_back(std::move(r));
    pending_.erase(name);
  }
}

std::set<int> Coordinator::missing(const Pending& p) const {
  std::set<int> m;
  for (int r = 0; r < static_cast<int>(p.state.size()); ++r)
    if (p.state[r] == Pending::kExpected && !joined_.count(r)) m.insert(r);
  return m;
}

void Coordinator::markIfReady(const std::string& name, Pending& p, SteadyTime now) {
  if (p.ready) return;
  // Only an allreduce runs while ranks are joined (they count as zeros); anything else that
  // needs a joined rank can never run, so it fails now rather than waiting for the ranks
  // still submitting: their unnamed operations may carry other names (the ranks submitted
  // different numbers of them before the join), and would never meet.
  bool needsJoined = false;
  if (!joined_.empty() && p.request.type != OpType::Allreduce)
    for (int r : joined_) needsJoined |= p.state[r] == Pending::kExpected;
  // Every submitter is expected, so without joined ranks the counts decide (O(1) per
  // submission instead of a scan of the expected ranks).
  bool complete = joined_.empty() ? p.submittedCount == p.expectedCount : missing(p).empty();
  if (!needsJoined && !complete) return;
  p.ready = true;
  readyOrder_.push_back(name);
  if (!firstReadyAt_) firstReadyAt_ = now;
}

std::optional<std::string> Coordinator::disagreement(const Pending& p) const {
  if (p.differing.empty()) return std::nullopt;
  std::vector<int> ranks = p.submitters();
  const OpRequest& lowest = p.requestOf(ranks.front());
  for (const auto& property : negotiatedProperties()) {
    std::map<int, std::string> values;
    for (int rank : ranks) values[rank] = property.format(p.requestOf(rank));
    bool same = std::all_of(values.begin(), values.end(),
                            [&](const auto& v) { return v.second == values.begin()->second; });
    if (!same)
      return detail::concat(opTypeName(lowest.type), " \"", lowest.name, "\": ", property.name,
                            " mismatch: ", describeByRank(values));
  }
  return std::nullopt;
}

Response Coordinator::decide(const std::string& name, Pending& p) {
  const OpRequest& request = p.request;
  Response r;
  r.type = request.type;
  r.names = {name};
  auto fail = [&](std::string message) {
    r.kind = ResponseKind::Error;
    r.message = std::move(message);
    return r;
  };
  if (auto why = disagreement(p)) return fail(*why);
  if (!involvesEveryRank(request.type) && processSet(request.processSet).empty())
    return fail(detail::concat(request.describe(), ": process set ", request.processSet,
                               " does not exist"));
  std::set<int> absentJoined;
  for (int rank : joined_)
    if (p.state[rank] == Pending::kExpected) absentJoined.insert(rank);
  if (!absentJoined.empty()) {
    if (request.type != OpType::Allreduce)
      return fail(detail::concat(request.describe(), ": ranks ", rankSet(absentJoined),
                                 " have joined; only allreduce can run while ranks are joined"));
    r.forJoined = {request};
  }
  return r;
}

void Coordinator::applyProcessSetChange(Response& r, const OpRequest& request) {
  if (r.kind != ResponseKind::Execute) return;
  if (request.type == OpType::AddProcessSet) {
    for (const auto& [id, ranks] : processSets_)
      if (ranks == request.setRanks) {
        r.kind = ResponseKind::Error;
        r.message = detail::concat("add_process_set: ranks ", rankSet(request.setRanks),
                                   " already form process set ", id);
        return;
      }
    r.value = nextProcessSetId_++;
    processSets_[r.value] = request.setRanks;
  } else if (request.type == OpType::RemoveProcessSet) {
    int32_t id = request.setRanks.empty() ? -1 : request.setRanks[0];
    if (id == 0 || !processSets_.count(id)) {
      r.kind = ResponseKind::Error;
      r.message = id == 0
                      ? std::string(
                            "remove_process_set: the global process set (0) cannot "
                            "be removed")
                      : detail::concat("remove_process_set: process set ", id, " does not exist");
      return;
    }
    processSets_.erase(id);
    r.value = id;
  }
}

void Coordinator::reduceIfInline(Response& r, const Pending& p, const OpRequest& request) const {
  if (r.kind != ResponseKind::Execute || r.type != OpType::Allreduce || !r.forJoined.empty())
    return;
  // Some rank will run the collective.
  if (static_cast<int>(p.inlineByRank.size()) != p.submittedCount) return;
  std::vector<const std::string*> contributions;
  for (const auto& [rank, data] : p.inlineByRank) {
    if (data.size() != request.totalBytes()) return;
    contributions.push_back(&data);
  }
  try {
    r.inlineResult = reduceInline(request, contributions);
  } catch (const InvalidArgument& e) {
    r.kind = ResponseKind::Error;
    r.message = detail::concat(request.describe(), ": ", e.what());
  }
}

void Coordinator::fuseInto(std::vector<Response>& out, std::vector<std::size_t>& openBytes,
                           std::vector<std::optional<FusionKey>>& openKeys, Response response,
                           const OpRequest& request) {
  std::optional<FusionKey> key;
  if (response.kind == ResponseKind::Execute && response.forJoined.empty() &&
      response.inlineResult.empty() && options_.fusionThresholdBytes > 0)
    key = fusionKey(request);
  std::size_t bytes = request.totalBytes();
  if (key)
    for (std::size_t i = 0; i < out.size(); ++i)
      if (openKeys[i] == key && openBytes[i] + bytes <= options_.fusionThresholdBytes) {
        out[i].names.push_back(response.names[0]);
        out[i].cacheIds.push_back(response.cacheIds[0]);
        openBytes[i] += bytes;
        return;
      }
  out.push_back(std::move(response));
  openKeys.push_back(key);
  openBytes.push_back(bytes);
}

ResponseList Coordinator::dispatch(SteadyTime now) {
  if (static_cast<int>(seenByRank_.size()) == options_.size) {
    uint64_t everyone = UINT64_MAX;
    for (const auto& [r, seen] : seenByRank_) everyone = std::min(everyone, seen);
    cache_.allRanksHaveSeen(everyone);
  }
  ResponseList list;
  list.seq = nextSeq_;
  std::vector<Response>& out = list.responses;
  if (!readyOrder_.empty() && options_.cycleTime.count() > 0 && firstReadyAt_ &&
      now < *firstReadyAt_ + options_.cycleTime)
    return list;
  std::vector<std::size_t> openBytes;
  std::vector<std::optional<FusionKey>> openKeys;
  for (const auto& name : readyOrder_) {
    auto it = pending_.find(name);
    Pending& p = it->second;
    Response r = decide(name, p);
    OpRequest request = std::move(p.request);
    applyProcessSetChange(r, request);
    reduceIfInline(r, p, request);
    if (r.kind == ResponseKind::Execute) {
      r.cacheIds = {cache_.recordExecuted(request, list.seq)};
      r.fusionThresholdBytes = options_.fusionThresholdBytes;
    }
    pending_.erase(it);
    fuseInto(out, openBytes, openKeys, std::move(r), request);
  }
  readyOrder_.clear();
  firstReadyAt_.reset();
  failWhatShutDownRanksWillNeverSubmit(out);
  failJoinThatCanNeverComplete(out);
  failFencesThatCanNeverMatch(out);
  if (static_cast<int>(joined_.size()) == options_.size) {
    Response done;
    done.kind = ResponseKind::JoinDone;
    done.type = OpType::Join;
    done.value = lastJoined_;
    out.push_back(done);
    joined_.clear();
  }
  if (options_.stallCheck && options_.stallShutdown.count() > 0) {
    std::string report;
    for (const auto& [name, p] : pending_)
      if (now - p.firstSeen >= options_.stallShutdown)
        report += (report.empty() ? "" : "; ") + stallReport(p, now);
    if (!report.empty()) {
      Response fatal;
      fatal.kind = ResponseKind::Fatal;
      fatal.message =
          detail::concat("stalled for more than ", options_.stallShutdown.count(),
                         " s (HVD_STALL_SHUTDOWN_TIME_SECONDS), stopping the job: ", report);
      out.push_back(fatal);
    }
  }
  if (!shutdownSent_ && static_cast<int>(shutdownRequested_.size()) == options_.size) {
    Response bye;
    bye.kind = ResponseKind::Shutdown;
    out.push_back(bye);
    shutdownSent_ = true;
  }
  list.evictedCacheIds = cache_.takeEvicted();
  if (!out.empty()) ++nextSeq_;
  return list;
}

void Coordinator::retune(std::size_t fusionThresholdBytes, std::chrono::microseconds cycleTime) {
  options_.fusionThresholdBytes = fusionThresholdBytes;
  options_.cycleTime = cycleTime;
}

std::optional<SteadyTime> Coordinator::nextDeadline() const {
  if (!readyOrder_.empty() && firstReadyAt_) return *firstReadyAt_ + options_.cycleTime;
  return std::nullopt;
}

std::string Coordinator::stallReport(const Pending& p, SteadyTime now) const {
  auto ranks = p.submitters();
  std::set<int> submitted(ranks.begin(), ranks.end());
  std::set<int> waitedFor = missing(p);
  return detail::concat(p.request.describe(), " submitted by ranks ", rankSet(submitted),
                        ", waiting ", static_cast<int>(secondsBetween(p.firstSeen, now)),
                        " s for ranks ", rankSet(waitedFor),
                        onHosts(options_.hostOfRank, waitedFor));
}

std::vector<std::string> Coordinator::stallWarnings(SteadyTime now) {
  std::vector<std::string> lines;
  if (!options_.stallCheck) return lines;
  for (auto& [name, p] : pending_) {
    if (p.ready || now - p.firstSeen < options_.stallWarning) continue;
    if (p.warnedAt != SteadyTime{} && now - p.warnedAt < options_.stallWarning) continue;
    p.warnedAt = now;
    lines.push_back(stallReport(p, now));
  }
  return lines;
}

}  // namespace hvd::runtime
