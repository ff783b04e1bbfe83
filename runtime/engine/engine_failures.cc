// How the engine fails operations and itself: operations the ranks disagreed on, a join that
// cannot complete, and the fatal error that stops the engine (engine.h, Failure).
#include "common/logging.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/failure_notice.h"

namespace hvd::runtime {
namespace {

using Clock = std::chrono::steady_clock;
// How long a failing engine tries to deliver its last messages (the root cause, to rank 0's
// peers): a peer that is stopped never reads them, and shutdown waits for this thread.
constexpr std::chrono::milliseconds kFatalFlushLimit{5000};

}  // namespace

void Engine::failJoin(const Response& r) {
  auto error = std::make_exception_ptr(InvalidArgument(r.message));
  if (join_) return endJoin(error);
  if (sentShutdown_) {
    // This rank is one that left: its program goes on to exit as if all went well unless its
    // shutdown says otherwise.
    log()->error("rank {}: {}", rank_, r.message);
    submissions_.setLeftJoinedRanks(error);
  }
}

void Engine::endJoin(std::exception_ptr error) {
  if (!join_) return;
  submissions_.joinEnded();
  finishOp(*join_, std::move(error));
  join_.reset();
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

void Engine::failEverything(std::exception_ptr error) {
  std::string why = whatOf(error);
  log()->error("rank {}: stopping: {}", rank_, why);
  if (options_.onFailure) options_.onFailure(why, causedByPeer(error));
  auto fatal = std::make_exception_ptr(Error(why));
  for (auto& op : submissions_.stop(fatal))
    op->handle->fail(inOperation(op->handle->description(), fatal));
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

}  // namespace hvd::runtime
