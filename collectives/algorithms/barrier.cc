// Dissemination barrier: in round k (k = 1, 2, 4, ...) each rank sends an empty message to rank
// + k and waits for one from rank - k. Rounds: ceil(log2 n); no payload bytes.
#include "collectives/algorithms/barrier.h"

#include "collectives/algorithms/tags.h"

namespace hvd::collectives {

void barrier(Comm& comm) {
  int n = comm.size(), r = comm.rank();
  Tag tag = makeTag(TagPrefix::Barrier, comm.nextSequence());
  auto deadline = comm.deadline();
  for (int k = 1; k < n; k <<= 1) {
    Request send = comm.peer((r + k) % n).isend({}, tag);
    comm.peer((r - k + n) % n).irecv({}, tag).wait(deadline);
    send.wait(deadline);
  }
}

}  // namespace hvd::collectives
