#include "launcher/rank_assignment.h"

#include <map>

#include "common/error.h"

namespace hvd::launcher {

std::vector<RankPlacement> assignRanks(const std::vector<HostSlots>& hosts, int np) {
  if (np < 1) throw InvalidArgument(detail::concat("-np ", np, ": need at least one process"));
  long total = 0;
  for (const auto& h : hosts) total += h.slots;
  if (np > total)
    throw InvalidArgument(detail::concat("-np ", np, " is more than the ", total,
                                         " slots of the hosts (", describeHosts(hosts), ")"));
  std::vector<RankPlacement> ranks;
  std::vector<int> perHost;  // workers placed on each used host
  for (const auto& h : hosts) {
    int used = 0;
    while (used < h.slots && static_cast<int>(ranks.size()) < np) {
      RankPlacement p;
      p.rank = static_cast<int>(ranks.size());
      p.size = np;
      p.localRank = used++;
      p.hostname = h.host;
      ranks.push_back(p);
    }
    if (used == 0) break;
    perHost.push_back(used);
  }
  // cross rank: hosts are numbered in order among those that have a given local rank.
  std::map<int, int> hostsWithLocalRank;
  int first = 0;
  for (int count : perHost) {
    for (int i = 0; i < count; ++i) {
      RankPlacement& p = ranks[first + i];
      p.localSize = count;
      p.crossRank = hostsWithLocalRank[p.localRank]++;
    }
    first += count;
  }
  for (auto& p : ranks) p.crossSize = hostsWithLocalRank[p.localRank];
  return ranks;
}

}  // namespace hvd::launcher
