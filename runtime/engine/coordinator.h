// Negotiation, as a state machine with no I/O (rank 0's engine feeds it and sends what it
// returns). It collects every rank's requests by name, and when all ranks an operation needs
// have submitted it, checks that they agree and turns the ready operations into Responses in one
// order, fusing compatible allreduces. It also tracks join, shutdown and stalls.
//   - A name is ready when every rank of its process set has submitted it, except ranks that
//     have joined (they contribute zeros to allreduce; other operations fail while ranks are
//     joined).
//   - Ranks that disagree (dtype, shape, op, root, scaling, device, process set, ...) get an
//     Error response naming the tensor and which ranks had which value.
//   - An allreduce every rank sent with its input bytes (inline_allreduce.h) is reduced here
//     and its response carries the result; no collective runs for it.
//   - With a cycle time, ready work is held until the cycle has passed, to fuse more; with
//     none (the default), dispatch() returns work as soon as it is ready.
// Thread model: owned by rank 0's engine thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/engine/fusion.h"
#include "runtime/engine/messages.h"
#include "runtime/engine/response_cache.h"

namespace hvd::runtime {

using SteadyTime = std::chrono::steady_clock::time_point;

struct CoordinatorOptions {
  // The rows tagged Coordinator: fusionThresholdBytes (0: no fusion), cycleTime, stallCheck,
  // stallWarning, stallShutdown (0: never fail a stalled job), cacheCapacity (0: no cache).
#define HVD_OPTION_MEMBERS_OF_Coordinator(type, member) type member{};
#include "common/param_option_members.h"
  int size = 1;
  // Every rank's host name, by rank: stall reports name the hosts of the ranks waited for.
  std::vector<std::string> hostOfRank;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);

  // A rank's RequestList: resolves cached ids, records what the rank has seen, submits.
  void submitList(int rank, const RequestList& list, SteadyTime now);
  // A rank's request (negotiated form). `cacheId` is the id it came under (0 if in full);
  // `inlineData` the input bytes of an allreduce small enough to reduce here (else empty).
  void submit(int rank, const OpRequest& request, uint64_t cacheId, SteadyTime now,
              std::string inlineData = {});
  void requestShutdown(int rank);
  bool shutdownRequested(int rank) const { return shutdownRequested_.count(rank) > 0; }
  // Ranks of process set `id` (0 is every rank); empty if it does not exist.
  const std::vector<int32_t>& processSet(int32_t id) const;

  // The responses ready now, in the order every rank must run them (an empty list when none),
  // with the cache ids of executed operations and the evicted ones. Records the process sets
  // that AddProcessSet/RemoveProcessSet responses create and remove.
  ResponseList dispatch(SteadyTime now);
  // The autotuner's new setting, used from the next dispatch on.
  void retune(std::size_t fusionThresholdBytes, std::chrono::microseconds cycleTime);
  // When dispatch() or stallWarnings() next has something to do without new input.
  std::optional<SteadyTime> nextDeadline() const;
  // One line per operation stalled past the warning time (each reported once per warning
  // period): the name, which ranks submitted it and which have not.
  std::vector<std::string> stallWarnings(SteadyTime now);

 private:
  // A rank that asked to shut down submits nothing more: operations still waiting for it fail
  // at once (naming it) instead of stalling until the stall inspector stops the job.
  void failWhatShutDownRanksWillNeverSubmit(std::vector<Response>& out);
  // Likewise a join: it completes when every rank joined, which a rank that shut down without
  // joining never will. Every rank gets the error: the joined ones fail their join, the one
  // that left reports it from its shutdown.
  void failJoinThatCanNeverComplete(std::vector<Response>& out);

  // One operation waiting for its ranks. Ranks' requests are kept once: the first submitter's,
  // and a copy only for a rank whose request differs from it (checked by cache id, else by
  // value), so that a cached cycle costs each rank a few byte writes and no allocation.
  struct Pending {
    OpRequest request;                        // the first submitter's
    uint64_t cacheId = 0;                     // the id it came under (0: in full)
    std::map<int, OpRequest> differing;       // ranks whose requests differ from `request`
    std::map<int, std::string> inlineByRank;  // ranks that sent their input bytes
    // Per rank (index): kExpected when the operation waits for it, kSubmitted once it did.
    std::vector<uint8_t> state;
    int expectedCount = 0;
    int submittedCount = 0;
    std::vector<int32_t> setsExpected;  // the process sets whose ranks are expected
    SteadyTime firstSeen;
    SteadyTime warnedAt{};
    bool ready = false;

    static constexpr uint8_t kExpected = 1;
    static constexpr uint8_t kSubmitted = 2;
    bool submitted(int rank) const { return state[rank] & kSubmitted; }
    std::vector<int> submitters() const;
    // A rank's request: its own where it differs, else the first submitter's.
    const OpRequest& requestOf(int rank) const;
  };

  void markIfReady(const std::string& name, Pending& p, SteadyTime now);
  std::set<int> missing(const Pending& p) const;
  void expect(Pending& p, int rank);
  // Fails the synchronous operations (barrier, add/remove_process_set) that wait for ranks
  // which themselves wait in another of them that cannot complete: a cycle no submission can
  // break, reported at once instead of at the stall shutdown.
  void failFencesThatCanNeverMatch(std::vector<Response>& out);
  std::optional<std::string> disagreement(const Pending& p) const;
  Response decide(const std::string& name, Pending& p);
  std::string stallReport(const Pending& p, SteadyTime now) const;
  void fuseInto(std::vector<Response>& out, std::vector<std::size_t>& openBytes,
                std::vector<std::optional<FusionKey>>& openKeys, Response response,
                const OpRequest& request);
  void applyProcessSetChange(Response& response, const OpRequest& request);
  // Fills response.inlineResult when every rank sent its input bytes; turns the response into
  // an Error when the reduction cannot run.
  void reduceIfInline(Response& response, const Pending& p, const OpRequest& request) const;

  CoordinatorOptions options_;
  std::unordered_map<std::string, Pending> pending_;
  std::vector<std::string> readyOrder_;
  std::map<int32_t, std::vector<int32_t>> processSets_;
  int32_t nextProcessSetId_ = 1;
  std::set<int> joined_;
  int lastJoined_ = -1;
  std::set<int> shutdownRequested_;
  bool shutdownSent_ = false;
  std::optional<SteadyTime> firstReadyAt_;
  CoordinatorCache cache_;
  uint64_t nextSeq_ = 1;
  std::map<int, uint64_t> seenByRank_;
};

// "ranks {0,2,3} float32, rank {1} float16": ranks grouped by value, in order of first rank.
std::string describeByRank(const std::map<int, std::string>& valueByRank);

}  // namespace hvd::runtime
