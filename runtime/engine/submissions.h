// The engine's submission desk: everything the callers' threads share with the engine thread,
// behind one mutex. Callers submit operations (checked, named and queued here) and ask about
// process sets; the engine thread takes the queue, retires finished names, changes the process
// sets, and records the fatal error and the shutdown. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/engine/local_op.h"
#include "runtime/engine/process_sets.h"

namespace hvd::runtime {

class Submissions {
 public:
  // `spinTime` and `blockedCallers` go to every handle (handle.h).
  Submissions(int rank, int size, std::chrono::microseconds spinTime,
              std::shared_ptr<std::atomic<int>> blockedCallers);

  struct Submitted {
    Handle handle;
    bool wakeEngine;  // the queue was empty: the engine takes it whole, so wake it once
  };
  // Throws InvalidArgument for an operation that cannot be valid on any rank (admission.h,
  // local_op.h) or whose name is already in flight on this rank; Error after shutdown; the
  // fatal error, in this operation's words, after one.
  Submitted submit(Operation op);

  struct Taken {
    std::vector<std::unique_ptr<LocalOp>> ops;
    bool shutdownRequested = false;
  };
  // Engine thread: the operations submitted since the last take.
  Taken take();
  // Engine thread: the operation finished; its name may be submitted again.
  void retire(const OpRequest& request);
  // Engine thread: this rank's join completed or failed; it may submit again.
  void joinEnded();

  std::optional<std::vector<int32_t>> processSet(int32_t id) const;
  std::vector<int32_t> processSetIds() const;
  // Engine thread: see ProcessSets.
  void addProcessSet(int32_t id, std::vector<int32_t> ranks,
                     std::unique_ptr<collectives::Comm> comm);
  std::unique_ptr<collectives::Comm> removeProcessSet(int32_t id);
  collectives::Comm* commFor(int32_t id, collectives::Comm* world) const;

  // Engine thread: the engine stops on `fatal` (the first one is kept); later submissions
  // throw it. Returns the operations still queued, for the engine to fail.
  std::vector<std::unique_ptr<LocalOp>> stop(std::exception_ptr fatal);
  void setLeftJoinedRanks(std::exception_ptr error);
  std::exception_ptr leftJoinedRanks() const;

  // True the first time: the caller wakes the engine thread to start the shutdown.
  bool requestShutdown();
  // Engine thread, last: the loop has ended.
  void engineFinished();
  // False when the engine thread has not finished within `timeout`.
  bool waitEngineFinished(std::chrono::milliseconds timeout);

  uint64_t submitted() const { return submitted_; }

 private:
  // "<op>.noname.<n>", n counting per op type and process set: the members of a set submit
  // the same unnamed operations on it, while ranks outside it submit none of them.
  std::string autoName(OpType type, int32_t processSet);

  const int rank_;
  const int size_;
  const std::chrono::microseconds spinTime_;
  const std::shared_ptr<std::atomic<int>> blockedCallers_;
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  std::vector<std::unique_ptr<LocalOp>> queue_;
  std::set<std::string> inFlight_;
  std::map<std::pair<OpType, int32_t>, uint64_t> unnamed_;
  ProcessSets sets_;
  std::exception_ptr fatal_;
  std::exception_ptr leftJoinedRanks_;
  bool joined_ = false;
  bool shutdownRequested_ = false;
  bool engineFinished_ = false;
  std::atomic<uint64_t> submitted_{0};
};

}  // namespace hvd::runtime
