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

rendezvous::elastic::Members placeMembers(const std::vector<ElasticWorker>& members,
                                          const std::vector<std::string>& hostOrder) {
  auto hostIndex = [&](const std::string& host) {
    auto it = std::find(hostOrder.begin(), hostOrder.end(), host);
    HVD_ENFORCE(it != hostOrder.end(), "elastic: host ", host, " has no place in the order");
    return it - hostOrder.begin();
  };
  std::vector<ElasticWorker> sorted = members;
  std::sort(sorted.begin(), sorted.end(), [&](const ElasticWorker& a, const ElasticWorker& b) {
    auto ia = hostIndex(a.where.host), ib = hostIndex(b.where.host);
    return ia != ib ? ia < ib : a.where.slot < b.where.slot;
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
