// Rank tests' fake hosts: a job's ranks grouped into hosts and given the Comm::Hierarchy the
// runtime gives a job of several hosts, so the staged collectives run over real links.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "collectives/transport/comm.h"
#include "collectives/transport/network_model.h"
#include "runtime/engine/host_layout.h"
#include "test/ranks/run_ranks.h"

namespace hvd::test {

// ByModel: allreduce and broadcast left to the cost model, flat or staged size by size.
enum class Staged { Allreduce, Allgather, ByModel };

// A job seen as hosts of `perHost` ranks each: contiguous (ranks 0..L-1 on the first host) or
// interleaved (rank r on host r mod H), as a launcher's placement may give them.
struct Hosts {
  int ranks, perHost;
  bool interleaved;
  Transport transport;
};

inline std::ostream& operator<<(std::ostream& out, const Hosts& h) {
  return out << nameOf(h.transport) << ", " << h.ranks << " ranks, " << h.perHost << " per host"
             << (h.interleaved ? ", interleaved" : "");
}

// Attaches `hosts` to comm, grouped as the runtime groups them (HostLayout), with `staged` the
// collective that runs in stages on them.
inline void attachHosts(collectives::Comm& comm, const Hosts& hosts, Staged staged) {
  int count = comm.size() / hosts.perHost;
  std::vector<std::string> hostOfRank;
  for (int r = 0; r < comm.size(); ++r)
    hostOfRank.push_back("host" +
                         std::to_string(hosts.interleaved ? r % count : r / hosts.perHost));
  auto layout = runtime::HostLayout::of(hostOfRank);
  comm.setHierarchy({comm.subset(layout.localRanks(comm.rank())),
                     comm.subset(layout.crossRanks(comm.rank())), layout.ranksOf,
                     staged == Staged::Allreduce, staged == Staged::Allgather,
                     staged == Staged::ByModel});
}

// A model whose NIC (100 us, 100 MB/s) is slow next to memory, so the staged forms win sizes
// the built-in model would keep flat: the matrices then run both forms on one communicator.
inline collectives::NetworkModel slowNicModel(int ranksPerHost) {
  collectives::NetworkModel model;
  model.interHost = {100e-6, 1e8};
  model.ranksPerHost = ranksPerHost;
  return model;
}

}  // namespace hvd::test
