#include "runtime/engine/submissions.h"

#include "common/error.h"
#include "common/format.h"
#include "runtime/engine/admission.h"
#include "runtime/engine/failure_notice.h"
#include "runtime/engine/gpu_executor.h"

namespace hvd::runtime {

Submissions::Submissions(int rank, int size, std::chrono::microseconds spinTime,
                         std::shared_ptr<std::atomic<int>> blockedCallers)
    : rank_(rank),
      size_(size),
      spinTime_(spinTime),
      blockedCallers_(std::move(blockedCallers)),
      sets_(rank, size) {}

std::string Submissions::autoName(OpType type, int32_t processSet) {
  return detail::concat(opTypeName(type), ".noname.", unnamed_[{type, processSet}]++);
}

Submissions::Submitted Submissions::submit(Operation op) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto what = [&op] { return detail::concat(opTypeName(op.type), " ", quotedOpName(op)); };
  if (fatal_) std::rethrow_exception(inOperation(what(), fatal_));
  if (shutdownRequested_ || engineFinished_) throw Error(what() + ": hvd is shut down");
  if (joined_)
    throw InvalidArgument(what() +
                          ": this rank has called join; wait for it to complete before "
                          "submitting more operations");
  int setSize = admitOperation(op, sets_, rank_, size_);
  if (op.type == OpType::Join) op.name = "join";
  if (op.name.empty()) op.name = autoName(op.type, op.processSet);
  auto local = std::make_unique<LocalOp>();
  local->request = describeOperation(op, setSize);
  if (!op.device.isCpu()) local->ready = markReady(op.device, op.stream, local->request.describe());
  if (!inFlight_.insert(local->request.key()).second)
    throw InvalidArgument(detail::concat(local->request.describe(), ": an operation named \"",
                                         op.name, "\" is already in flight on rank ", rank_,
                                         "; wait for it or use another name"));
  if (op.type == OpType::Join) joined_ = true;
  local->op = std::move(op);
  local->handle = std::make_shared<OpHandle>(local->request.describe(), spinTime_, blockedCallers_);
  local->submittedAt = std::chrono::steady_clock::now();
  Submitted submitted{local->handle, queue_.empty()};
  queue_.push_back(std::move(local));
  ++submitted_;
  return submitted;
}

Submissions::Taken Submissions::take() {
  Taken taken;
  std::lock_guard<std::mutex> lock(mutex_);
  taken.ops.swap(queue_);
  taken.shutdownRequested = shutdownRequested_;
  return taken;
}

void Submissions::retire(const OpRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  inFlight_.erase(request.key());
}

void Submissions::joinEnded() {
  std::lock_guard<std::mutex> lock(mutex_);
  joined_ = false;
}

std::optional<std::vector<int32_t>> Submissions::processSet(int32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto* ranks = sets_.ranks(id);
  if (!ranks) return std::nullopt;
  return *ranks;
}

std::vector<int32_t> Submissions::processSetIds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sets_.ids();
}

void Submissions::addProcessSet(int32_t id, std::vector<int32_t> ranks,
                                std::unique_ptr<collectives::Comm> comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  sets_.add(id, std::move(ranks), std::move(comm));
}

std::unique_ptr<collectives::Comm> Submissions::removeProcessSet(int32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return sets_.remove(id);
}

collectives::Comm* Submissions::commFor(int32_t id, collectives::Comm* world) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sets_.commFor(id, world);
}

std::vector<std::unique_ptr<LocalOp>> Submissions::stop(std::exception_ptr fatal) {
  std::vector<std::unique_ptr<LocalOp>> queued;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fatal_) fatal_ = std::move(fatal);
  queued.swap(queue_);
  inFlight_.clear();
  joined_ = false;
  return queued;
}

void Submissions::setLeftJoinedRanks(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  leftJoinedRanks_ = std::move(error);
}

std::exception_ptr Submissions::leftJoinedRanks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leftJoinedRanks_;
}

bool Submissions::requestShutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool first = !shutdownRequested_;
  shutdownRequested_ = true;
  return first;
}

void Submissions::engineFinished() {
  std::lock_guard<std::mutex> lock(mutex_);
  engineFinished_ = true;
  finished_.notify_all();
}

bool Submissions::waitEngineFinished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_.wait_for(lock, timeout, [&] { return engineFinished_; });
}

}  // namespace hvd::runtime
