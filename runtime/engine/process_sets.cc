#include "runtime/engine/process_sets.h"

#include <algorithm>

namespace hvd::runtime {

ProcessSets::ProcessSets(int rank, int size) : rank_(rank) {
  std::vector<int32_t> world(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) world[static_cast<std::size_t>(r)] = r;
  sets_[0] = Set{std::move(world), nullptr};
}

const std::vector<int32_t>* ProcessSets::ranks(int32_t id) const {
  auto it = sets_.find(id);
  return it == sets_.end() ? nullptr : &it->second.ranks;
}

std::vector<int32_t> ProcessSets::ids() const {
  std::vector<int32_t> ids;
  for (const auto& [id, set] : sets_) ids.push_back(id);
  return ids;
}

bool ProcessSets::contains(int32_t id, int rank) const {
  const auto* members = ranks(id);
  return members && std::find(members->begin(), members->end(), rank) != members->end();
}

void ProcessSets::add(int32_t id, std::vector<int32_t> ranks,
                      std::unique_ptr<collectives::Comm> comm) {
  sets_[id] = Set{std::move(ranks), std::move(comm)};
}

std::unique_ptr<collectives::Comm> ProcessSets::remove(int32_t id) {
  auto it = sets_.find(id);
  if (it == sets_.end()) return nullptr;
  auto comm = std::move(it->second.comm);
  sets_.erase(it);
  return comm;
}

collectives::Comm* ProcessSets::commFor(int32_t id, collectives::Comm* world) const {
  if (!contains(id, rank_)) return nullptr;
  return id == 0 ? world : sets_.at(id).comm.get();
}

}  // namespace hvd::runtime
