// The engine's two control messages. Every rank sends its coordinator (rank 0) a RequestList
// when it has new work; the coordinator sends every rank the same ResponseLists in the same
// order, and every rank executes them in that order. That shared order is what makes ranks that
// submitted in different orders run the same collectives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/operation.h"

namespace hvd::runtime {

// One submitted operation: its full description, or only the response-cache id the coordinator
// gave an identical earlier request of the same name (a few bytes instead of the metadata).
struct Submission {
  uint64_t cacheId = 0;  // non-zero: cached, and `request` is unused
  OpRequest request;
  // A small host-memory allreduce's input bytes (its tensors back to back), so that the
  // coordinator can reduce it itself (coordinator.h); empty otherwise.
  std::string inlineData;
};

struct RequestList {
  uint64_t responseListsSeen = 0;  // lets the coordinator forget evicted cache entries
  std::vector<Submission> submissions;
  bool shutdown = false;  // this rank called shutdown
  // This rank's engine failed, and why: the coordinator stops the job with it, and a rank
  // whose link to this one broke meanwhile names this cause rather than the broken link.
  std::string failure;

  std::string encode() const;
  static RequestList decode(const std::string& bytes);
};

// Codes run from 0 to Fatal, the last (ResponseList::decode checks the range): append.
enum class ResponseKind : uint8_t {
  Execute,   // run `names` (fused into as few collectives as the fusion threshold allows)
  Error,     // fail `names` with `message` on every rank; the job goes on
  JoinDone,  // every rank has joined; `value` is the last rank to join
  Shutdown,  // every rank called shutdown
  Fatal      // the job cannot go on (a stall past its limit): fail everything with `message`
};

struct Response {
  ResponseKind kind = ResponseKind::Execute;
  OpType type = OpType::Allreduce;
  std::vector<std::string> names;
  std::vector<uint64_t> cacheIds;  // parallel to names; 0 when the cache is off
  std::string message;
  int32_t value = -1;  // JoinDone: last rank to join; AddProcessSet: the new set's id
  // Execute of an allreduce some ranks did not submit because they joined: those ranks
  // contribute zeros shaped like these requests (parallel to names).
  std::vector<OpRequest> forJoined;
  // Execute of an allreduce the coordinator reduced from the ranks' inline data: the result
  // (tensors back to back); ranks copy it out instead of running a collective.
  std::string inlineResult;
  // Execute of an allreduce: the fusion threshold the coordinator grouped it with. Every rank's
  // executor cuts the same chunks with it; the autotuner changes it while the job runs.
  uint64_t fusionThresholdBytes = 0;
};

struct ResponseList {
  // The seq of rank 0's heartbeat: a list that carries nothing and is not counted.
  static constexpr uint64_t kHeartbeatSeq = UINT64_MAX;
  uint64_t seq = 0;
  std::vector<uint64_t> evictedCacheIds;
  std::vector<Response> responses;

  std::string encode() const;
  static ResponseList decode(const std::string& bytes);
};

}  // namespace hvd::runtime
