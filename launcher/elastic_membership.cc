#include "launcher/elastic_membership.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "launcher/rank_assignment.h"

namespace hvd::launcher {

MembershipChange planMembership(const std::vector<ElasticWorker>& current,
                                const std::vector<HostSlots>& offered, int maxNp) {
  std::map<std::string, int> slotsOf;
  for (const auto& h : offered) slotsOf[h.host] = h.slots;
  std::size_t cap = maxNp < 0 ? SIZE_MAX : static_cast<std::size_t>(maxNp);
  MembershipChange change;
  for (const auto& w : current) {
    auto it = slotsOf.find(w.where.host);
    bool offeredStill = it != slotsOf.end() && w.where.slot < it->second;
    if (offeredStill && change.keep.size() < cap)
      change.keep.push_back(w);
    else
      change.remove.push_back(w);
  }
  for (const auto& h : offered)
    for (int slot = 0; slot < h.slots && change.size() < cap; ++slot) {
      ElasticSlot s{h.host, slot};
      bool taken = std::any_of(change.keep.begin(), change.keep.end(),
                               [&](const ElasticWorker& w) { return w.where == s; });
      if (!taken) change.add.push_back(s);
    }
  return change;
}

rendezvous::elastic::Members placeMembers(const std::vector<ElasticWorker>& members) {
  std::map<std::string, int> oldest;  // host -> its lowest worker id
  for (const auto& w : members) {
    auto [it, added] = oldest.emplace(w.where.host, w.id);
    if (!added) it->second = std::min(it->second, w.id);
  }
  std::vector<ElasticWorker> sorted = members;
  std::sort(sorted.begin(), sorted.end(), [&](const ElasticWorker& a, const ElasticWorker& b) {
    int ha = oldest.at(a.where.host), hb = oldest.at(b.where.host);
    return ha != hb ? ha < hb : a.id < b.id;
  });
  std::vector<HostSlots> counts;
  for (const auto& w : sorted)
    if (counts.empty() || counts.back().host != w.where.host)
      counts.push_back({w.where.host, 1});
    else
      ++counts.back().slots;
  rendezvous::elastic::Members out;
  if (sorted.empty()) return out;
  auto placements = assignRanks(counts, static_cast<int>(sorted.size()));
  for (std::size_t i = 0; i < sorted.size(); ++i) out[sorted[i].id] = placements[i];
  return out;
}

}  // namespace hvd::launcher
