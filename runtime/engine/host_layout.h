// Where each rank of a communicator runs, from every rank's host name: hosts in the order of
// their first rank, each host's ranks in rank order. The hierarchical allreduces of host memory
// (runtime/host_hierarchy.h) and of GPU tensors (gpu_executor_cuda.cc) split ranks by it; it
// lives in the engine because the latter does.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace hvd::runtime {

// " (on host h)" or " (on hosts h1, h2)": the hosts of `ranks`, each once, in rank order, for a
// message that names ranks; empty when hostOfRank does not know them.
std::string onHosts(const std::vector<std::string>& hostOfRank, const std::set<int>& ranks);

struct HostLayout {
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> ranksOf;  // per host

  // hostOfRank[r] is the host rank r runs on.
  static HostLayout of(const std::vector<std::string>& hostOfRank);
  bool even() const;         // as many ranks on every host
  std::string text() const;  // "a: 2, b: 2"
  // The ranks on `rank`'s host, and (sorted) those with its index among them on every host;
  // the latter needs even().
  const std::vector<int>& localRanks(int rank) const;
  std::vector<int> crossRanks(int rank) const;
};

}  // namespace hvd::runtime
