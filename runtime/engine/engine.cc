#include "runtime/engine/engine.h"

#include <pthread.h>

#include "common/format.h"
#include "common/logging.h"
#include "runtime/engine/failure_notice.h"
#include "runtime/engine/inline_allreduce.h"
#include "runtime/engine/scoped_flag.h"

namespace hvd::runtime {
namespace {

using Clock = std::chrono::steady_clock;
// A loop that stays busy or spins looks after liveness every this many turns (and before each
// sleep): not on every turn, whose latency a 4-byte allreduce feels.
constexpr unsigned kLivenessTurns = 1024;

std::vector<int> allRanksBut(int size, int self) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r)
    if (r != self) ranks.push_back(r);
  return ranks;
}

std::exception_ptr shutDownError(const LocalOp& op) {
  return std::make_exception_ptr(
      Error(op.request.describe() + ": hvd was shut down before the operation ran"));
}

}  // namespace

std::shared_ptr<spdlog::logger> Engine::log() const {
  return log::logger(options_.logs.get(), "engine");
}

Engine::Engine(EngineOptions options, std::unique_ptr<collectives::Comm> data,
               std::unique_ptr<collectives::Comm> control)
    : options_(std::move(options)),
      rank_(data->rank()),
      size_(data->size()),
      data_(std::move(data)),
      control_(std::make_unique<ControlChannel>(
          std::move(control), rank_ == 0 ? allRanksBut(size_, 0) : std::vector<int>{0},
          options_.hostOfRank)),
      submissions_(rank_, size_, options_.spinTime, options_.blockedCallers),
      timeline_(rank_),
      executor_(options_.executor, timeline_),
      heartbeats_(rank_, size_, options_.livenessTimeout, options_.hostOfRank) {
  if (rank_ == 0) {
    CoordinatorOptions c = options_.coordinator;
    c.size = size_;
    coordinator_ = std::make_unique<Coordinator>(c);
    if (!options_.timelinePath.empty())
      timeline_.start(options_.timelinePath, options_.timelineMarkCycles);
    if (options_.autotune.enabled)
      autotune_ = std::make_unique<AutotuneSession>(
          options_.autotune, TuningParams{c.fusionThresholdBytes, c.cycleTime}, log());
  }
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  abort_ = true;
  if (control_) control_->wake();
  if (thread_.joinable()) thread_.join();
}

Handle Engine::enqueue(Operation op) {
  auto submitted = submissions_.submit(std::move(op));
  if (submitted.wakeEngine) control_->wake();
  return submitted.handle;
}

bool Engine::takeSubmissions() {
  auto [fresh, shutdownRequested] = submissions_.take();
  bool shutdown = shutdownRequested && !sentShutdown_;
  if (fresh.empty() && !shutdown) return false;
  RequestList list;
  list.responseListsSeen = listsSeen_;
  for (auto& op : fresh) {
    Submission s;
    op->negotiated = op->request.negotiated();
    s.request = op->negotiated;
    if (op->op.type != OpType::Join && options_.coordinator.cacheCapacity > 0) {
      s.cacheId = workerCache_.idFor(s.request);
      ++(s.cacheId ? counters_.cacheHits : counters_.cacheMisses);
    }
    if (travelsInline(op->request, options_.inlineAllreduceBytes)) s.inlineData = packInputs(*op);
    list.submissions.push_back(std::move(s));
    if (op->op.type == OpType::Join)
      join_ = std::move(op);
    else
      waiting_[op->request.key()] = std::move(op);
  }
  list.shutdown = shutdown;
  sentShutdown_ |= shutdown;
  if (coordinator_)
    coordinator_->submitList(rank_, list, Clock::now());
  else
    control_->send(0, list.encode());
  return true;
}

bool Engine::readControl() {
  auto messages = control_->receive();
  if (heartbeats_.heardAnyInCollective()) {  // they came first
    auto heard = heartbeats_.takeHeardInCollective();
    messages.insert(messages.begin(), std::make_move_iterator(heard.begin()),
                    std::make_move_iterator(heard.end()));
  }
  auto now = messages.empty() ? Clock::time_point{} : Clock::now();
  for (auto& [peer, bytes] : messages) {
    heartbeats_.heard(peer, now);
    if (coordinator_) {
      RequestList list = RequestList::decode(bytes);
      if (!list.failure.empty())
        throw PeerLost(detail::concat("rank ", peer, " failed: ", list.failure));
      coordinator_->submitList(peer, std::move(list), Clock::now());
    } else {
      applyResponses(ResponseList::decode(bytes));
    }
    if (finished_) break;
  }
  return !messages.empty();
}

bool Engine::coordinate() {
  auto now = Clock::now();
  for (const auto& line : coordinator_->stallWarnings(now))
    log()->warn("stall: {} (HVD_STALL_CHECK_TIME_SECONDS)", line);
  ResponseList list = coordinator_->dispatch(now);
  if (list.responses.empty()) return false;
  if (timeline_.marksCycles() && timeline_.active()) timeline_.markCycle(now);
  std::string bytes = list.encode();
  for (int r = 1; r < size_; ++r) control_->send(r, bytes);
  // A rank joins the collectives of a list only once all of it has arrived, and a list larger
  // than the link buffers moves on only while this rank polls, which it does not inside a
  // collective: so the list leaves before this rank runs it. The other ranks never wait to
  // read it: their sends do not block, and their collectives of earlier lists end without us.
  control_->flush(Clock::now() + options_.opTimeout);
  if (autotune_ && !autotune_->done()) {
    // Rank 0 holds every operation of the global set.
    auto tuned = autotune_->observe(
        list,
        [this](const std::string& name) {
          auto it = waiting_.find(name);
          return it == waiting_.end() ? uint64_t{0} : uint64_t{it->second->request.totalBytes()};
        },
        now);
    counters_.autotuneSamples = autotune_->samples();
    if (tuned) coordinator_->retune(tuned->fusionThresholdBytes, tuned->cycleTime);
  }
  applyResponses(list);
  return true;
}

void Engine::applyResponses(const ResponseList& list) {
  if (list.seq == ResponseList::kHeartbeatSeq) return;  // rank 0 is alive; nothing to do
  listsSeen_ = list.seq;
  ++counters_.responseLists;
  for (uint64_t id : list.evictedCacheIds) workerCache_.forget(id);
  for (const auto& response : list.responses) applyResponse(response);
}

void Engine::applyResponse(const Response& r) {
  switch (r.kind) {
    case ResponseKind::Execute:
      return execute(r);
    case ResponseKind::Error:
      if (r.type == OpType::Join) return failJoin(r);
      return failNamed(r, r.message);
    case ResponseKind::JoinDone:
      if (join_) join_->result.value = r.value;
      return endJoin(nullptr);
    case ResponseKind::Shutdown:
      finished_ = true;
      for (auto& [name, op] : waiting_) finishOp(*op, shutDownError(*op));
      waiting_.clear();
      if (join_) finishOp(*join_, shutDownError(*join_));
      join_.reset();
      return;
    case ResponseKind::Fatal:
      // Rank 0 relays a rank's failure, or stops the job on a stall: on no rank is it the
      // rank's own error.
      throw PeerLost(r.message);
  }
}

void Engine::execute(const Response& r) {
  std::vector<std::unique_ptr<LocalOp>> owned;
  std::vector<LocalOp*> ops;
  int32_t setId = -1;
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    auto it = waiting_.find(r.names[i]);
    if (it != waiting_.end()) {
      owned.push_back(std::move(it->second));
      waiting_.erase(it);
      ops.push_back(owned.back().get());
      setId = ops.back()->request.processSet;
    } else {
      ops.push_back(nullptr);
      if (i < r.forJoined.size()) setId = r.forJoined[i].processSet;
    }
  }
  try {
    try {
      run(r, ops, setId);
    } catch (const std::bad_alloc&) {
      std::rethrow_exception(outOfMemory(rank_, opTypeName(r.type), ops));
    }
  } catch (...) {
    // The operations that were running fail at once: their callers are waiting, and the
    // engine is about to stop (failEverything) without them in its queues.
    auto reported = reportCollectiveFailure(*control_, rank_, size_, std::current_exception());
    for (LocalOp* op : ops)
      if (op && !op->handle->poll())
        finishOp(*op, inOperation(op->handle->description(), reported));
    std::rethrow_exception(reported);
  }
}

void Engine::run(const Response& r, const std::vector<LocalOp*>& ops, int32_t setId) {
  if (r.type == OpType::AddProcessSet || r.type == OpType::RemoveProcessSet)
    return changeProcessSets(r, *ops.at(0));
  if (setId < 0) return;  // this rank is not in the operation's process set
  collectives::Comm* comm = submissions_.commFor(setId, data_.get());
  if (!comm) return;
  if (timeline_.active()) timeline_.record(negotiationEvents(ops, Clock::now()));
  if (!r.inlineResult.empty()) return completeInline(r, ops);
  try {
    ScopedFlag inCollective(heartbeats_.inCollective());
    executor_.run(r, ops, *comm);
  } catch (const InvalidArgument&) {
    for (LocalOp* op : ops)
      if (op) finishOp(*op, std::current_exception());
    return;
  }
  counters_.collectives = executor_.counters().collectives;
  counters_.fusedTensors = executor_.counters().fusedTensors;
  // Callers wait on these handles; learning cache ids can wait for them.
  for (LocalOp* op : ops)
    if (op) finishOp(*op, nullptr);
  for (std::size_t i = 0; i < ops.size() && i < r.cacheIds.size(); ++i)
    if (ops[i]) workerCache_.learn(ops[i]->negotiated, r.cacheIds[i]);
}

void Engine::changeProcessSets(const Response& r, LocalOp& op) {
  if (r.type == OpType::AddProcessSet) {
    const auto& ranks = op.request.setRanks;
    bool member = std::find(ranks.begin(), ranks.end(), rank_) != ranks.end();
    std::vector<int> sorted(ranks.begin(), ranks.end());
    submissions_.addProcessSet(r.value, ranks, member ? data_->subset(sorted) : nullptr);
  } else if (auto comm = submissions_.removeProcessSet(r.value)) {
    executor_.forget(comm.get());
  }
  op.result.value = r.value;
  finishOp(op, nullptr);
}

void Engine::completeInline(const Response& r, const std::vector<LocalOp*>& ops) {
  HVD_ENFORCE(ops.size() == 1 && ops[0], "inline allreduce response for ", r.names.size(),
              " names, of which this rank did not submit some");
  LocalOp& op = *ops[0];
  auto t0 = Clock::now();
  unpackResult(r.inlineResult, op);
  ++counters_.inlineAllreduces;
  if (timeline_.active())
    timeline_.record(
        {{timelineRow(op.request.type, op.request.name), "ALLREDUCE (on the coordinator)", t0,
          Clock::now(), op.request.totalBytes()}});
  finishOp(op, nullptr);
  if (!r.cacheIds.empty()) workerCache_.learn(op.negotiated, r.cacheIds[0]);
}

void Engine::finishOp(LocalOp& op, std::exception_ptr error) {
  submissions_.retire(op.request);
  if (error)
    op.handle->fail(error);
  else
    op.handle->complete(std::move(op.result));
}

collectives::Deadline Engine::nextWake() const {
  // Rank 0 looks at stalls every second; the others only wait for messages and submissions.
  auto wake = Clock::now() + std::chrono::seconds(1);
  if (coordinator_)
    if (auto d = coordinator_->nextDeadline()) wake = std::min(wake, *d);
  return wake;
}

void Engine::loop() {
  pthread_setname_np(pthread_self(), "hvd-engine");
  heartbeats_.start(Clock::now());
  // Waits inside collectives keep this rank's heartbeats going; only a collective's waits,
  // since the control channel's own must not re-enter it.
  collectives::WaitPulse pulse([this] {
    if (heartbeats_.inCollective()) pulseInCollective();
  });
  try {
    Clock::time_point spinUntil{};
    unsigned turns = 0;
    while (!finished_ && !abort_) {
      bool busy = takeSubmissions();
      busy |= readControl();
      if (coordinator_ && !finished_) busy |= coordinate();
      if (++turns % kLivenessTurns == 0) {
        heartbeat();
        checkLiveness();
      }
      if (busy) {
        if (options_.spinTime.count() > 0) spinUntil = Clock::now() + options_.spinTime;
        continue;
      }
      if (finished_) break;
      if (Clock::now() < spinUntil) {
        std::this_thread::yield();
      } else {
        heartbeat();
        checkLiveness();
        control_->waitForActivity(nextWake());
      }
    }
    control_->flush(Clock::now() + options_.opTimeout);
  } catch (const std::exception&) {
    failEverything(std::current_exception());
  }
  submissions_.engineFinished();
}

bool Engine::shutdown() {
  if (submissions_.requestShutdown()) control_->wake();
  if (!submissions_.waitEngineFinished(options_.opTimeout)) {
    log()->warn(
        "rank {}: shutdown: not every rank called shutdown within {} s; leaving without them",
        rank_, options_.opTimeout.count() / 1000);
    abort_ = true;
  }
  bool together = !abort_;
  control_->wake();
  if (thread_.joinable()) thread_.join();
  timeline_.stop();
  return together;
}

EngineStats Engine::stats() const {
  const Counters& c = counters_;
  return {submissions_.submitted(), c.cacheHits,     c.cacheMisses,      c.collectives,
          c.fusedTensors,           c.responseLists, c.inlineAllreduces, c.autotuneSamples};
}

std::optional<std::vector<int32_t>> Engine::processSet(int32_t id) const {
  return submissions_.processSet(id);
}

std::vector<int32_t> Engine::processSetIds() const { return submissions_.processSetIds(); }

void Engine::startTimeline(const std::string& path, bool markCycles) {
  if (rank_ == 0) timeline_.start(path, markCycles);
}

void Engine::stopTimeline() { timeline_.stop(); }

}  // namespace hvd::runtime
