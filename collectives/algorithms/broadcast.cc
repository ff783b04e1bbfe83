// Binomial-tree broadcast: ranks are renumbered relative to the root; in round k every rank that
// already holds the data sends it to the rank 2^k above it.
//   Rounds: ceil(log2 n). Bytes sent per rank: at most ceil(log2 n) * size (the root).
#include "collectives/algorithms/broadcast.h"

#include "collectives/algorithms/tags.h"

namespace hvd::collectives {

void broadcast(Comm& comm, void* data, std::size_t bytes, int root) {
  int n = comm.size();
  if (root < 0 || root >= n)
    throw InvalidArgument(detail::concat("broadcast: root rank ", root, " is outside [0, ", n, ")"));
  Tag tag = makeTag(TagPrefix::Broadcast, comm.nextSequence());
  if (n == 1 || bytes == 0) return;
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (relative & mask) {
      comm.peer((relative - mask + root) % n).irecv(asWritableBytes(data, bytes), tag).wait(deadline);
      break;
    }
  }
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      sends.push_back(comm.peer((relative + mask + root) % n).isend(asBytes(data, bytes), tag));
  for (auto& s : sends) s.wait(deadline);
}

}  // namespace hvd::collectives
