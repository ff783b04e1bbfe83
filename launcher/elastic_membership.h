// Who runs in an elastic job's next round: pure decisions, no I/O. Workers keep their host and
// slot for life; a round keeps every worker whose slot is still offered, then fills the offered
// slots in host order up to --max-np. Ranks follow the hosts' order of first appearance and the
// slots within a host, so rank 0 stays on the oldest host still in the job (the one whose state
// a new round broadcasts).
#pragma once

#include <string>
#include <vector>

#include "collectives/rendezvous/elastic_rounds.h"
#include "launcher/host_spec.h"

namespace hvd::launcher {

struct ElasticSlot {
  std::string host;
  int slot = 0;
  bool operator==(const ElasticSlot& o) const { return host == o.host && slot == o.slot; }
};

struct ElasticWorker {
  int id = 0;
  ElasticSlot where;
};

struct MembershipChange {
  std::vector<ElasticWorker> keep;
  std::vector<ElasticWorker> remove;
  std::vector<ElasticSlot> add;  // slots for new workers, in rank order
  bool changed() const { return !remove.empty() || !add.empty(); }
  std::size_t size() const { return keep.size() + add.size(); }
};

// `offered`: the usable hosts (blacklisted ones already left out) in the job's host order.
// maxNp < 0: no cap.
MembershipChange planMembership(const std::vector<ElasticWorker>& current,
                                const std::vector<HostSlots>& offered, int maxNp);

// Placements of `members` (any order): the workers that joined earliest first, each host's
// workers together: hosts by their oldest worker (lowest id), and on a host by id. So rank 0 is
// the oldest worker still in the job, one that holds the training's last commit, and never a
// replacement that just started (the state is broadcast from rank 0 at each new round).
rendezvous::elastic::Members placeMembers(const std::vector<ElasticWorker>& members);

}  // namespace hvd::launcher
