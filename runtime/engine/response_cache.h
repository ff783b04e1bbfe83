// The response cache, after Horovod's: once an operation of some name has run, the coordinator
// gives it an id, and a later identical request of that name travels as the id alone. The
// coordinator owns the ids (LRU, bounded by HVD_CACHE_CAPACITY) and announces evictions in its
// ResponseLists; it keeps an evicted entry until every rank has seen the announcement, so an id
// sent just before the eviction still resolves. Capacity 0 turns the cache off.
// Thread model: each object belongs to the engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/engine/operation.h"

namespace hvd::runtime {

class CoordinatorCache {
 public:
  explicit CoordinatorCache(std::size_t capacity) : capacity_(capacity) {}

  // Records that `request` (negotiated form) ran; returns its id (0 with the cache off). A
  // different request under a cached name replaces it under a new id.
  uint64_t recordExecuted(const OpRequest& request, uint64_t responseListSeq);
  // The request an id stands for, including recently evicted ones. Throws InternalError for an
  // id it never gave out.
  const OpRequest& resolve(uint64_t id) const;
  // Ids evicted since the last call, to announce in the next ResponseList.
  std::vector<uint64_t> takeEvicted();
  // Every rank has seen ResponseList `seq`: evictions announced up to it are forgotten.
  void allRanksHaveSeen(uint64_t seq);
  std::size_t size() const { return byName_.size(); }

 private:
  struct Entry {
    uint64_t id;
    OpRequest request;
    std::list<std::string>::iterator lru;
  };
  void evict(const std::string& name, uint64_t seq);

  std::size_t capacity_;
  uint64_t nextId_ = 1;
  std::list<std::string> lru_;  // front: most recently used
  std::unordered_map<std::string, Entry> byName_;
  std::unordered_map<uint64_t, const Entry*> byId_;
  std::map<uint64_t, std::pair<OpRequest, uint64_t>> evicted_;  // id -> (request, seq announced)
  std::vector<uint64_t> toAnnounce_;
};

// A rank's view: which of its requests the coordinator has ids for.
class WorkerCache {
 public:
  // The id to send for `request` (negotiated form), or 0 when it must travel in full.
  uint64_t idFor(const OpRequest& request) const;
  void learn(const OpRequest& request, uint64_t id);
  void forget(uint64_t id);

 private:
  std::unordered_map<std::string, std::pair<uint64_t, OpRequest>> byName_;
  std::unordered_map<uint64_t, std::string> nameOf_;
};

}  // namespace hvd::runtime
