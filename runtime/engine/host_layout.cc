#include "runtime/engine/host_layout.h"

#include <algorithm>

#include "common/error.h"

namespace hvd::runtime {

std::string onHosts(const std::vector<std::string>& hostOfRank, const std::set<int>& ranks) {
  std::vector<std::string> hosts;
  for (int r : ranks)
    if (r >= 0 && static_cast<std::size_t>(r) < hostOfRank.size() &&
        std::find(hosts.begin(), hosts.end(), hostOfRank[r]) == hosts.end())
      hosts.push_back(hostOfRank[r]);
  if (hosts.empty()) return "";
  std::string out = hosts.size() > 1 ? " (on hosts " : " (on host ";
  for (std::size_t i = 0; i < hosts.size(); ++i) out += (i ? ", " : "") + hosts[i];
  return out + ")";
}

HostLayout HostLayout::of(const std::vector<std::string>& hostOfRank) {
  HostLayout layout;
  for (int r = 0; r < static_cast<int>(hostOfRank.size()); ++r) {
    auto it = std::find(layout.hosts.begin(), layout.hosts.end(), hostOfRank[r]);
    if (it == layout.hosts.end()) {
      layout.hosts.push_back(hostOfRank[r]);
      layout.ranksOf.emplace_back();
      it = layout.hosts.end() - 1;
    }
    layout.ranksOf[it - layout.hosts.begin()].push_back(r);
  }
  return layout;
}

bool HostLayout::even() const {
  for (const auto& ranks : ranksOf)
    if (ranks.size() != ranksOf.front().size()) return false;
  return true;
}

std::string HostLayout::text() const {
  std::string out;
  for (std::size_t h = 0; h < hosts.size(); ++h)
    out += detail::concat(h ? ", " : "", hosts[h], ": ", ranksOf[h].size());
  return out;
}

const std::vector<int>& HostLayout::localRanks(int rank) const {
  for (const auto& ranks : ranksOf)
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) return ranks;
  HVD_ENFORCE(false, "rank ", rank, " is on none of the hosts ", text());
  return ranksOf.front();  // not reached
}

std::vector<int> HostLayout::crossRanks(int rank) const {
  HVD_ENFORCE(even(), "cross-host ranks need as many ranks on every host (", text(), ")");
  const std::vector<int>& mine = localRanks(rank);
  std::size_t index = std::find(mine.begin(), mine.end(), rank) - mine.begin();
  std::vector<int> cross;
  for (const auto& ranks : ranksOf) cross.push_back(ranks[index]);
  std::sort(cross.begin(), cross.end());
  return cross;
}

}  // namespace hvd::runtime
