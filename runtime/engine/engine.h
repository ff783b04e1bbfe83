// The background engine: one thread per Runtime that takes the operations callers enqueue,
// negotiates them with the coordinator (rank 0's engine, see coordinator.h) so that every rank
// runs them in one order, and runs them (executor.h), or copies out the result the coordinator
// reduced for an allreduce small enough to travel with its request (inline_allreduce.h).
//
// Each loop of the engine thread: take new submissions and tell the coordinator (rank 0 hands
// them to its Coordinator directly; others send a RequestList); read control messages; on rank
// 0, dispatch what is ready to every rank; run the responses in order. With nothing to do it
// keeps polling for the spin time (HVD_SPIN_MICROSECONDS) after its last activity, then sleeps
// in the control link's poll until a message, a submission (wake) or the next deadline (cycle
// time, stall check), so a lone operation starts at once and an idle job costs no CPU.
//
// Failure: an error that breaks the communicator (a peer died, a stall past its limit, a broken
// invariant) is fatal: every pending and later operation fails with that root cause, and rank 0
// forwards it to the other ranks. An operation the ranks disagree on fails alone.
//
// Thread model: enqueue, stats, process-set queries, start/stopTimeline and shutdown may be
// called from any thread; what they share with the engine thread is its submission desk
// (submissions.h). Everything else belongs to the engine thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>

#include "runtime/engine/autotuner.h"
#include "runtime/engine/control_channel.h"
#include "runtime/engine/coordinator.h"
#include "runtime/engine/engine_options.h"
#include "runtime/engine/executor.h"
#include "runtime/engine/heartbeats.h"
#include "runtime/engine/local_op.h"
#include "runtime/engine/response_cache.h"
#include "runtime/engine/submissions.h"
#include "runtime/engine/timeline.h"

namespace hvd::runtime {

struct EngineStats {
  uint64_t submitted = 0;
  uint64_t cacheHits = 0;    // submissions sent as a response-cache id
  uint64_t cacheMisses = 0;  // submissions sent in full
  uint64_t collectives = 0;  // collective calls made (each piece of a fused allreduce once)
  uint64_t fusedTensors = 0;
  uint64_t responseLists = 0;
  uint64_t inlineAllreduces = 0;  // allreduces the coordinator reduced (no collective ran)
  uint64_t autotuneSamples = 0;   // rank 0: samples the autotuner finished (warm-up included)
};

class Engine {
 public:
  // Takes the data communicator (collectives) and the control communicator (negotiation); both
  // span the whole job. Starts the engine thread.
  Engine(EngineOptions options, std::unique_ptr<collectives::Comm> data,
         std::unique_ptr<collectives::Comm> control);
  ~Engine();  // stops the thread without the collective shutdown if shutdown() was not called

  // Throws InvalidArgument for an operation that cannot be valid on any rank (naming it and
  // the value) or whose name is already in flight on this rank; after a fatal error, throws
  // that error.
  Handle enqueue(Operation op);
  // Collective: returns when every rank has called it (or after the op timeout, with a
  // warning); operations still pending then fail. False when it left without the other ranks
  // (the op timeout ran out).
  bool shutdown();
  // After shutdown(): the error this rank caused by leaving while others waited in join (they
  // failed it naming this rank), for the caller to raise; null if none.
  std::exception_ptr leftJoinedRanksError() const { return submissions_.leftJoinedRanks(); }

  EngineStats stats() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks of process set `id`, or nullopt when it does not exist (as this rank knows it).
  std::optional<std::vector<int32_t>> processSet(int32_t id) const;
  std::vector<int32_t> processSetIds() const;
  void startTimeline(const std::string& path, bool markCycles);
  void stopTimeline();

 private:
  // Written by the engine thread, read by stats() from any thread.
  struct Counters {
    std::atomic<uint64_t> cacheHits{0}, cacheMisses{0}, responseLists{0}, collectives{0},
        fusedTensors{0}, inlineAllreduces{0}, autotuneSamples{0};
  };

  void loop();
  bool takeSubmissions();
  bool readControl();
  bool coordinate();
  void applyResponses(const ResponseList& list);
  void applyResponse(const Response& response);
  void execute(const Response& response);
  // execute()'s work on the operations it took from waiting_ (null: not submitted here).
  void run(const Response& response, const std::vector<LocalOp*>& ops, int32_t setId);
  void changeProcessSets(const Response& response, LocalOp& op);
  // Sends this rank's heartbeat when one is due (heartbeats.h).
  void heartbeat();
  // About once a second inside a collective's waits: heartbeat, hear the peers, and fail the
  // collective if one went silent or rank 0 reported the job failed.
  void pulseInCollective();
  // Throws PeerLost naming a peer this engine has not heard from for the liveness timeout.
  void checkLiveness();
  void completeInline(const Response& response, const std::vector<LocalOp*>& ops);
  void failNamed(const Response& response, const std::string& message);
  void finishOp(LocalOp& op, std::exception_ptr error);
  // The coordinator's verdict on a join that can never complete (a rank left without joining).
  void failJoin(const Response& r);
  void endJoin(std::exception_ptr error);
  void failEverything(std::exception_ptr error);
  collectives::Deadline nextWake() const;
  std::shared_ptr<spdlog::logger> log() const;

  EngineOptions options_;
  const int rank_;
  const int size_;
  std::unique_ptr<collectives::Comm> data_;
  std::unique_ptr<ControlChannel> control_;
  Submissions submissions_;  // shared with the callers' threads
  Timeline timeline_;
  Executor executor_;
  Counters counters_;
  std::atomic<bool> abort_{false};  // leave now, without the collective shutdown

  // Engine thread.
  WorkerCache workerCache_;
  std::unique_ptr<Coordinator> coordinator_;   // rank 0 only
  std::unique_ptr<AutotuneSession> autotune_;  // rank 0 with HVD_AUTOTUNE only
  std::unordered_map<std::string, std::unique_ptr<LocalOp>> waiting_;  // submitted, not yet run
  std::unique_ptr<LocalOp> join_;
  uint64_t listsSeen_ = 0;
  bool sentShutdown_ = false;
  bool finished_ = false;
  Heartbeats heartbeats_;

  std::thread thread_;
};

}  // namespace hvd::runtime
