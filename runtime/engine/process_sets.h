// The process sets a rank knows (Horovod's hvd.ProcessSet): each set's ranks, in increasing
// order, and this rank's communicator for it. Set 0 is the whole job and uses the engine's
// own communicator. Not thread-safe: the engine's submission desk guards it (submissions.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::runtime {

class ProcessSets {
 public:
  ProcessSets(int rank, int size);

  // The ranks of set `id`, or null when it does not exist (as this rank knows it).
  const std::vector<int32_t>* ranks(int32_t id) const;
  std::vector<int32_t> ids() const;
  bool contains(int32_t id, int rank) const;
  // `comm`: this rank's communicator for the set, null when it is not a member.
  void add(int32_t id, std::vector<int32_t> ranks, std::unique_ptr<collectives::Comm> comm);
  // Removes the set and hands back its communicator (null if none) for the caller to retire.
  std::unique_ptr<collectives::Comm> remove(int32_t id);
  // The communicator this rank runs set `id`'s collectives on (`world` for set 0); null when
  // the set does not exist or this rank is not in it.
  collectives::Comm* commFor(int32_t id, collectives::Comm* world) const;

 private:
  struct Set {
    std::vector<int32_t> ranks;
    std::unique_ptr<collectives::Comm> comm;
  };
  int rank_;
  std::map<int32_t, Set> sets_;
};

}  // namespace hvd::runtime
