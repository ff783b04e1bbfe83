#include "runtime/engine/response_cache.h"

#include <utility>

#include "common/error.h"

namespace hvd::runtime {

uint64_t CoordinatorCache::recordExecuted(const OpRequest& request, uint64_t seq) {
  if (capacity_ == 0) return 0;
  auto it = byName_.find(request.key());
  if (it != byName_.end()) {
    if (it->second.request == request) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.id;
    }
    evict(request.key(), seq);
  }
  if (byName_.size() >= capacity_) evict(lru_.back(), seq);
  lru_.push_front(request.key());
  auto& entry = byName_[request.key()];
  entry = Entry{nextId_++, request, lru_.begin()};
  byId_[entry.id] = &entry;
  return entry.id;
}

void CoordinatorCache::evict(const std::string& name, uint64_t seq) {
  auto it = byName_.find(name);
  Entry& e = it->second;
  evicted_[e.id] = {e.request, seq};
  toAnnounce_.push_back(e.id);
  byId_.erase(e.id);
  lru_.erase(e.lru);
  byName_.erase(it);
}

const OpRequest& CoordinatorCache::resolve(uint64_t id) const {
  if (auto it = byId_.find(id); it != byId_.end()) return it->second->request;
  if (auto it = evicted_.find(id); it != evicted_.end()) return it->second.first;
  throw InternalError(detail::concat("response cache id ", id, " is unknown to the coordinator"));
}

std::vector<uint64_t> CoordinatorCache::takeEvicted() { return std::exchange(toAnnounce_, {}); }

void CoordinatorCache::allRanksHaveSeen(uint64_t seq) {
  for (auto it = evicted_.begin(); it != evicted_.end();)
    it = it->second.second <= seq ? evicted_.erase(it) : std::next(it);
}

uint64_t WorkerCache::idFor(const OpRequest& request) const {
  auto it = byName_.find(request.key());
  return it != byName_.end() && it->second.second == request ? it->second.first : 0;
}

void WorkerCache::learn(const OpRequest& request, uint64_t id) {
  if (id == 0) return;
  auto it = byName_.find(request.key());
  if (it != byName_.end() && it->second.first == id) return;  // steady state: already known
  if (it != byName_.end()) nameOf_.erase(it->second.first);
  byName_[request.key()] = {id, request};
  nameOf_[id] = request.key();
}

void WorkerCache::forget(uint64_t id) {
  auto it = nameOf_.find(id);
  if (it == nameOf_.end()) return;
  auto named = byName_.find(it->second);
  if (named != byName_.end() && named->second.first == id) byName_.erase(named);
  nameOf_.erase(it);
}

}  // namespace hvd::runtime
