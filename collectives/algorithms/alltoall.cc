// Direct exchange: every receive and every send is posted at once, so all n-1 links carry data
// at the same time. Rounds: 1. Bytes sent per rank: the input minus the block kept.
#include "collectives/algorithms/alltoall.h"

#include <cstring>
#include <numeric>

#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {
std::vector<std::size_t> offsetsOf(const std::vector<std::size_t>& sizes) {
  std::vector<std::size_t> offsets(sizes.size(), 0);
  std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), std::size_t{0});
  return offsets;
}
}  // namespace

void alltoallv(Comm& comm, const void* input, const std::vector<std::size_t>& sendBytes,
               void* output, const std::vector<std::size_t>& recvBytes) {
  int n = comm.size(), r = comm.rank();
  HVD_ENFORCE_EQ(static_cast<int>(sendBytes.size()), n);
  HVD_ENFORCE_EQ(static_cast<int>(recvBytes.size()), n);
  HVD_ENFORCE_EQ(sendBytes[r], recvBytes[r], "the block a rank keeps has one size");
  Tag tag = makeTag(TagPrefix::Alltoall, comm.nextSequence());
  auto sendOffsets = offsetsOf(sendBytes), recvOffsets = offsetsOf(recvBytes);
  const auto* in = static_cast<const std::byte*>(input);
  auto* out = static_cast<std::byte*>(output);
  auto deadline = comm.deadline();
  std::vector<Request> requests;
  for (int s = 1; s < n; ++s) {
    int from = (r - s + n) % n;
    requests.push_back(comm.peer(from).irecv({out + recvOffsets[from], recvBytes[from]}, tag));
  }
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n;
    requests.push_back(comm.peer(to).isend({in + sendOffsets[to], sendBytes[to]}, tag));
  }
  if (sendBytes[r] > 0) std::memcpy(out + recvOffsets[r], in + sendOffsets[r], sendBytes[r]);
  for (auto& req : requests) req.wait(deadline);
}

}  // namespace hvd::collectives
