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
// How long a failing engine tries to deliver its last messages (the root cause, to rank 0's
// peers): a peer that is stopped never reads them, and shutdown waits for this thread.
constexpr std::chrono::milliseconds kFatalFlushLimit{5000};
// How long a rank whose collective failed listens for a peer's notice that it failed first.
constexpr std::chrono::milliseconds kPeerFailureWait{200};
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

std::shared_ptr<spdlog::logger> engineLog(const EngineOptions& options) {
  return log::logger(options.logs.get(), "engine");
}

}  // namespace

Engine::Engine(EngineOptions options, std::unique_ptr<collectives::Comm> data,
               std::unique_ptr<collectives::Comm> control)
    : options_(std::move(options)),
      rank_(data->rank()),
      size_(data->size()),
      data_(std::move(data)),
      timeline_(rank_),
      executor_(options_.executor, timeline_),
      liveness_(rank_, size_, options_.livenessTimeout, options_.hostOfRank) {
  control_ = std::make_unique<ControlChannel>(
      std::move(control), rank_ == 0 ? allRanksBut(size_, 0) : std::vector<int>{0},
      options_.hostOfRank);
  std::vector<int32_t> world;
  for (int r = 0; r < size_; ++r) world.push_back(r);
  processSets_[0] = ProcessSetState{world, nullptr};
  if (rank_ == 0) {
    CoordinatorOptions c = options_.coordinator;
    c.size = size_;
    c.cacheCapacity = options_.cacheCapacity;
    coordinator_ = std::make_unique<Coordinator>(c);
    if (!options_.timelinePath.empty()) timeline_.start(options_.timelinePath);
    markCycles_ = options_.timelineMarkCycles;
    if (options_.autotune) {
      autotuner_ = std::make_unique<Autotuner>(*options_.autotune,
                                               TuningParams{c.fusionThresholdBytes, c.cycleTime});
      if (!options_.autotuneLogPath.empty()) autotuneLog_.open(options_.autotuneLogPath);
    }
  }
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  abort_ = true;
  if (control_) control_->wake();
  if (thread_.joinable()) thread_.join();
}

std::string Engine::autoName(OpType type, int32_t processSet) {
  return detail::concat(opTypeName(type), ".noname.", unnamed_[{type, processSet}]++);
}

Handle Engine::enqueue(Operation op) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::string opName = op.name.empty() ? opTypeName(op.type) : "\"" + op.name + "\"";
  if (fatal_)
    std::rethrow_exception(inOperation(detail::concat(opTypeName(op.type), " ", opName), fatal_));
  if (shutdownCalled_ || threadDone_)
    throw Error(detail::concat(opTypeName(op.type), " ", opName, ": hvd is shut down"));
  if (joined_)
    throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName,
                                         ": this rank has called join; wait for it to complete "
                                         "before submitting more operations"));
  int setSize = size_;
  if (op.type != OpType::AddProcessSet && op.type != OpType::RemoveProcessSet) {
    auto it = processSets_.find(op.processSet);
    if (it == processSets_.end())
      throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName, ": process set ",
                                           op.processSet, " does not exist"));
    const auto& ranks = it->second.ranks;
    if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end())
      throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName, ": rank ", rank_,
                                           " is not in process set ", op.processSet, " ",
                                           rankSet(ranks)));
    setSize = static_cast<int>(ranks.size());
    if (op.type == OpType::Broadcast && op.processSet != 0) {
      // root_rank is a global rank, as in Horovod; the set's communicator counts its members.
      auto root = std::find(ranks.begin(), ranks.end(), op.root);
      if (root == ranks.end())
        throw InvalidArgument(detail::concat(opTypeName(op.type), " ", opName, ": root_rank ",
                                             op.root, " is not a member of process set ",
                                             op.processSet, " ", rankSet(ranks),
                                             " (root_rank is a global rank)"));
      op.root = static_cast<int32_t>(root - ranks.begin());
    }
  }
  if (op.reduceOp == ReduceOp::Adasum) checkAdasumOperation(op, opName, setSize);
  if (op.type == OpType::Join) op.name = "join";
  if (op.name.empty()) op.name = autoName(op.type, op.processSet);
  auto local = std::make_unique<LocalOp>();
  local->request = describeOperation(op, setSize);
  if (!op.device.isCpu()) local->ready = markReady(op.device, op.stream, local->request.describe());
  if (inFlight_.count(local->request.key()))
    throw InvalidArgument(detail::concat(local->request.describe(), ": an operation named \"",
                                         op.name, "\" is already in flight on rank ", rank_,
                                         "; wait for it or use another name"));
  inFlight_.insert(local->request.key());
  if (op.type == OpType::Join) joined_ = true;
  local->op = std::move(op);
  local->handle = std::make_shared<OpHandle>(local->request.describe(), options_.spinTime,
                                             options_.blockedCallers);
  local->submittedAt = Clock::now();
  Handle handle = local->handle;
  // The engine takes the whole queue at once, so only the first entry needs to wake it.
  bool wake = queue_.empty();
  queue_.push_back(std::move(local));
  ++submitted_;
  lock.unlock();
  if (wake) control_->wake();
  return handle;
}

bool Engine::takeSubmissions() {
  std::vector<std::unique_ptr<LocalOp>> fresh;
  bool shutdown = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fresh.swap(queue_);
    shutdown = shutdownCalled_ && !sentShutdown_;
  }
  if (fresh.empty() && !shutdown) return false;
  RequestList list;
  list.responseListsSeen = listsSeen_;
  for (auto& op : fresh) {
    Submission s;
    op->negotiated = op->request.negotiated();
    s.request = op->negotiated;
    if (op->op.type != OpType::Join && options_.cacheCapacity > 0) {
      s.cacheId = workerCache_.idFor(s.request);
      ++(s.cacheId ? cacheHits_ : cacheMisses_);
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
  if (!heardInCollective_.empty()) {
    messages.insert(messages.begin(), std::make_move_iterator(heardInCollective_.begin()),
                    std::make_move_iterator(heardInCollective_.end()));
    heardInCollective_.clear();
  }
  auto now = messages.empty() ? Clock::time_point{} : Clock::now();
  for (auto& [peer, bytes] : messages) {
    liveness_.heard(peer, now);
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
    engineLog(options_)->warn("stall: {} (HVD_STALL_CHECK_TIME_SECONDS)", line);
  ResponseList list = coordinator_->dispatch(now);
  if (list.responses.empty()) return false;
  if (markCycles_ && timeline_.active()) timeline_.markCycle(now);
  std::string bytes = list.encode();
  for (int r = 1; r < size_; ++r) control_->send(r, bytes);
  // A rank joins the collectives of a list only once all of it has arrived, and a list larger
  // than the link buffers moves on only while this rank polls, which it does not inside a
  // collective: so the list leaves before this rank runs it. The other ranks never wait to
  // read it: their sends do not block, and their collectives of earlier lists end without us.
  control_->flush(Clock::now() + options_.opTimeout);
  if (autotuner_ && !autotuner_->done()) autotune(list, now);
  applyResponses(list);
  return true;
}

void Engine::autotune(const ResponseList& list, SteadyTime now) {
  std::vector<std::pair<std::string_view, uint64_t>> executed;
  for (const auto& r : list.responses) {
    if (r.kind != ResponseKind::Execute) continue;
    for (const auto& name : r.names) {
      // Rank 0 holds every operation of the global set; an operation of a process set without
      // rank 0 counts as a step marker without bytes.
      auto it = waiting_.find(name);
      executed.emplace_back(name, it == waiting_.end() ? 0 : it->second->request.totalBytes());
    }
  }
  auto outcome = autotuner_->observe(executed, now);
  for (const auto& sample : outcome.finished) {
    autotuneLog_.write(sample);
    ++autotuneSamples_;
    if (sample.phase == "chosen")
      engineLog(options_)->info(
          "autotune: chose fusion threshold {} bytes and cycle time {} ms ({:.1f} MB/s)",
          sample.params.fusionThresholdBytes, sample.params.cycleTime.count() / 1000.0,
          sample.score / 1e6);
  }
  if (outcome.retuned)
    coordinator_->retune(autotuner_->current().fusionThresholdBytes,
                         autotuner_->current().cycleTime);
}

void Engine::applyResponses(const ResponseList& list) {
  if (list.seq == ResponseList::kHeartbeatSeq) return;  // rank 0 is alive; nothing to do
  listsSeen_ = list.seq;
  ++responseLists_;
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
      if (join_) {
        join_->result.value = r.value;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          joined_ = false;
        }
        finishOp(*join_, nullptr);
        join_.reset();
      }
      return;
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

void Engine::failJoin(const Response& r) {
  auto error = std::make_exception_ptr(InvalidArgument(r.message));
  if (join_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      joined_ = false;
    }
    finishOp(*join_, error);
    join_.reset();
  } else if (sentShutdown_) {
    // This rank is one that left: its program goes on to exit as if all went well unless its
    // shutdown says otherwise.
    engineLog(options_)->error("rank {}: {}", rank_, r.message);
    std::lock_guard<std::mutex> lock(mutex_);
    leftJoinedRanks_ = error;
  }
}

std::exception_ptr Engine::leftJoinedRanksError() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leftJoinedRanks_;
}

void Engine::failNamed(const Response& r, const std::string& message) {
  for (const auto& name : r.names) {
    auto it = waiting_.find(name);
    if (it == waiting_.end()) continue;
    auto op = std::move(it->second);
    waiting_.erase(it);
    finishOp(*op, std::make_exception_ptr(InvalidArgument(message)));
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
    // engine is about to stop (failEverything) without them in its queues. A link that broke
    // because its peer failed first is not the cause: that peer's notice names it.
    // Every rank announces before it listens: ranks that waited for each other's notice
    // before sending their own would each hear nothing.
    auto error = std::current_exception();
    std::string cause = peerFailure(*control_, rank_, std::chrono::milliseconds(0));
    announceFailure(*control_, rank_, size_, whatOf(error));
    if (cause.empty()) cause = peerFailure(*control_, rank_, kPeerFailureWait);
    auto reported =
        cause.empty()
            ? error
            : std::make_exception_ptr(PeerLost(detail::concat(whatOf(error), "; ", cause)));
    for (LocalOp* op : ops)
      if (op && !op->handle->poll())
        finishOp(*op, inOperation(op->handle->description(), reported));
    if (!cause.empty()) std::rethrow_exception(reported);
    throw;
  }
}

void Engine::run(const Response& r, const std::vector<LocalOp*>& ops, int32_t setId) {
  if (r.type == OpType::AddProcessSet || r.type == OpType::RemoveProcessSet) {
    LocalOp& op = *ops.at(0);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (r.type == OpType::AddProcessSet) {
        const auto& ranks = op.request.setRanks;
        bool member = std::find(ranks.begin(), ranks.end(), rank_) != ranks.end();
        std::vector<int> sorted(ranks.begin(), ranks.end());
        processSets_[r.value] = {ranks, member ? data_->subset(sorted) : nullptr};
      } else {
        auto it = processSets_.find(r.value);
        if (it != processSets_.end() && it->second.comm) executor_.forget(it->second.comm.get());
        processSets_.erase(r.value);
      }
    }
    op.result.value = r.value;
    return finishOp(op, nullptr);
  }
  if (setId < 0) return;  // this rank is not in the operation's process set
  collectives::Comm* comm = data_.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = processSets_.find(setId);
    if (it == processSets_.end()) return;
    const auto& ranks = it->second.ranks;
    if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return;
    if (setId != 0) comm = it->second.comm.get();
  }
  if (timeline_.active()) {
    std::vector<Timeline::Event> events;
    auto now = Clock::now();
    for (LocalOp* op : ops)
      if (op)
        events.push_back({timelineRow(op->request.type, op->request.name),
                          timelinePhase(op->request.type, "NEGOTIATE"), op->submittedAt, now,
                          op->request.totalBytes()});
    timeline_.record(events);
  }
  if (!r.inlineResult.empty()) return completeInline(r, ops);
  try {
    ScopedFlag inCollective(inCollective_);
    executor_.run(r, ops, *comm);
  } catch (const InvalidArgument&) {
    for (LocalOp* op : ops)
      if (op) finishOp(*op, std::current_exception());
    return;
  }
  collectives_ = executor_.counters().collectives;
  fusedTensors_ = executor_.counters().fusedTensors;
  // Callers wait on these handles; learning cache ids can wait for them.
  for (LocalOp* op : ops)
    if (op) finishOp(*op, nullptr);
  for (std::size_t i = 0; i < ops.size() && i < r.cacheIds.size(); ++i)
    if (ops[i]) workerCache_.learn(ops[i]->negotiated, r.cacheIds[i]);
}

void Engine::completeInline(const Response& r, const std::vector<LocalOp*>& ops) {
  HVD_ENFORCE(ops.size() == 1 && ops[0], "inline allreduce response for ", r.names.size(),
              " names, of which this rank did not submit some");
  LocalOp& op = *ops[0];
  auto t0 = Clock::now();
  unpackResult(r.inlineResult, op);
  ++inlineAllreduces_;
  if (timeline_.active())
    timeline_.record(
        {{timelineRow(op.request.type, op.request.name), "ALLREDUCE (on the coordinator)", t0,
          Clock::now(), op.request.totalBytes()}});
  finishOp(op, nullptr);
  if (!r.cacheIds.empty()) workerCache_.learn(op.negotiated, r.cacheIds[0]);
}

void Engine::finishOp(LocalOp& op, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inFlight_.erase(op.request.key());
  }
  if (error)
    op.handle->fail(error);
  else
    op.handle->complete(std::move(op.result));
}

void Engine::failEverything(std::exception_ptr error) {
  std::string why = whatOf(error);
  engineLog(options_)->error("rank {}: stopping: {}", rank_, why);
  if (options_.onFailure) options_.onFailure(why, causedByPeer(error));
  auto fatal = std::make_exception_ptr(Error(why));
  std::vector<std::unique_ptr<LocalOp>> queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fatal_) fatal_ = fatal;
    queued.swap(queue_);
    inFlight_.clear();
    joined_ = false;
  }
  for (auto& op : queued) op->handle->fail(inOperation(op->handle->description(), fatal));
  for (auto& [name, op] : waiting_) op->handle->fail(inOperation(op->handle->description(), fatal));
  waiting_.clear();
  if (join_) join_->handle->fail(fatal);
  join_.reset();
  // Tell the other ranks the root cause (rank 0 tells every rank, the others tell rank 0), so
  // their operations fail with it too.
  announceFailure(*control_, rank_, size_, why);
  try {  // best effort: a peer that died or stopped does not read, so not for long
    control_->flush(Clock::now() +
                    std::min<std::chrono::milliseconds>(options_.opTimeout, kFatalFlushLimit));
  } catch (const std::exception&) {}
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
  liveness_.start(Clock::now());
  // Waits inside collectives keep this rank's heartbeats going; only a collective's waits,
  // since the control channel's own must not re-enter it.
  collectives::WaitPulse pulse([this] {
    if (inCollective_) pulseInCollective();
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
  std::lock_guard<std::mutex> lock(mutex_);
  threadDone_ = true;
  stopped_.notify_all();
}

bool Engine::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!shutdownCalled_) {
    shutdownCalled_ = true;
    lock.unlock();
    control_->wake();
    lock.lock();
  }
  if (!stopped_.wait_for(lock, options_.opTimeout, [&] { return threadDone_; })) {
    engineLog(options_)->warn(
        "rank {}: shutdown: not every rank called shutdown within {} s; leaving without them",
        rank_, options_.opTimeout.count() / 1000);
    abort_ = true;
  }
  bool together = !abort_;
  lock.unlock();
  control_->wake();
  if (thread_.joinable()) thread_.join();
  timeline_.stop();
  return together;
}

EngineStats Engine::stats() const {
  return {submitted_,    cacheHits_,     cacheMisses_,      collectives_,
          fusedTensors_, responseLists_, inlineAllreduces_, autotuneSamples_};
}

std::optional<std::vector<int32_t>> Engine::processSet(int32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = processSets_.find(id);
  if (it == processSets_.end()) return std::nullopt;
  return it->second.ranks;
}

std::vector<int32_t> Engine::processSetIds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int32_t> ids;
  for (const auto& [id, set] : processSets_) ids.push_back(id);
  return ids;
}

void Engine::startTimeline(const std::string& path, bool markCycles) {
  if (rank_ != 0) return;
  markCycles_ = markCycles;
  timeline_.start(path);
}

void Engine::stopTimeline() { timeline_.stop(); }

}  // namespace hvd::runtime
