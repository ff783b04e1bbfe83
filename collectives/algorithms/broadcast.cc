// Broadcast, by chooseBroadcastAlgorithm:
// - Binomial tree: ranks renumbered relative to the root; in round k every rank that holds the
//   data sends it to the rank 2^k above it. Rounds: ceil(log2 n).
// - Pipelined chain (n > 2): root -> root+1 -> ... in segments; each rank forwards a segment as
//   soon as it has it. Time ~ size/bandwidth + (n-2) segment times; bytes sent per rank: size
//   (the last rank sends nothing).
// - Hierarchical (a communicator with a Comm::Hierarchy, where the model says): the ranks of
//   the root's local index broadcast across hosts, then each of them within its host; each
//   stage picks its algorithm as a flat broadcast would (by the model across hosts, by the
//   threshold within a host, over shared memory).
// - Scatter-allgather (n > 2): the payload cut into n blocks; a binomial scatter leaves block i
//   on the rank i above the root (the root sends half the payload in its first round, a
//   quarter in its second, ...), then a ring allgather (n-1 steps of one block). Bytes received
//   per rank: under twice the payload, however many ranks; rounds ceil(log2 n) + n-1.
#include "collectives/algorithms/broadcast.h"

#include <algorithm>
#include <vector>

#include "collectives/algorithms/cost_model.h"
#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

void binomialTree(Comm& comm, std::byte* data, std::size_t bytes, int root, Tag tag) {
  int n = comm.size();
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (relative & mask) {
      comm.peer((relative - mask + root) % n).irecv({data, bytes}, tag).wait(deadline);
      break;
    }
  }
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      sends.push_back(comm.peer((relative + mask + root) % n).isend({data, bytes}, tag));
  for (auto& s : sends) s.wait(deadline);
}

void pipelinedChain(Comm& comm, std::byte* data, std::size_t bytes, int root, Tag tag,
                    std::size_t segmentBytes) {
  int n = comm.size();
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  bool hasPrev = relative > 0, hasNext = relative < n - 1;
  std::vector<Request> recvs, sends;
  auto segs = segmentsOf(0, bytes, segmentBytes);
  Connection* prev = hasPrev ? &comm.peer(ringIndex(comm.rank() - 1, n)) : nullptr;
  Connection* next = hasNext ? &comm.peer(ringIndex(comm.rank() + 1, n)) : nullptr;
  if (prev)
    for (auto seg : segs) recvs.push_back(prev->irecv({data + seg.offset, seg.count}, tag));
  for (std::size_t k = 0; k < segs.size(); ++k) {
    if (prev) recvs[k].wait(deadline);
    if (next) sends.push_back(next->isend({data + segs[k].offset, segs[k].count}, tag));
  }
  for (auto& s : sends) s.wait(deadline);
}

// Relative rank i ends holding block i of `blocks` (in bytes); the root holds all of them.
void binomialScatter(Comm& comm, std::byte* data, std::size_t bytes, const Blocks& blocks, int root,
                     Tag tag) {
  int n = comm.size();
  auto deadline = comm.deadline();
  int relative = (comm.rank() - root + n) % n;
  // Blocks [first, last) as one run of bytes.
  auto run = [&](int first, int last) -> MutableBytes {
    std::size_t begin = blocks.offsets[first];
    std::size_t end = last < n ? blocks.offsets[last] : bytes;
    return {data + begin, end - begin};
  };
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (relative & mask) {
      comm.peer((relative - mask + root) % n)
          .irecv(run(relative, std::min(relative + mask, n)), tag)
          .wait(deadline);
      break;
    }
  }
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (relative + mask < n)
      sends.push_back(comm.peer((relative + mask + root) % n)
                          .isend(run(relative + mask, std::min(relative + 2 * mask, n)), tag));
  for (auto& s : sends) s.wait(deadline);
}

void scatterAllgather(Comm& comm, std::byte* data, std::size_t bytes, int root, Tag tag,
                      std::size_t segmentLimitBytes) {
  int n = comm.size();
  Blocks blocks = evenBlocks(bytes, n);
  binomialScatter(comm, data, bytes, blocks, root, tag);
  // Rank r holds block r - root.
  ringAllgather(comm, data, blocks, 1, -root, ringSegmentBytes(bytes, n, segmentLimitBytes), tag);
}

// The root's host and local index in the hierarchy, and its rank on the cross communicator
// (the column's ranks in ascending order).
struct RootPlace {
  int local = -1;
  int cross = 0;
};

RootPlace placeOf(const Comm::Hierarchy& h, int root) {
  RootPlace place;
  for (const auto& host : h.hosts)
    for (std::size_t i = 0; i < host.size(); ++i)
      if (host[i] == root) place.local = static_cast<int>(i);
  HVD_ENFORCE(place.local >= 0, "broadcast: root ", root, " is on no host of the hierarchy");
  for (const auto& host : h.hosts) place.cross += host[place.local] < root;
  return place;
}

void hierarchicalBroadcast(const Comm::Hierarchy& h, std::byte* data, std::size_t bytes, int root,
                           const BroadcastOptions& options) {
  RootPlace place = placeOf(h, root);
  if (h.local->rank() == place.local) {
    BroadcastOptions across = options;
    across.ranksPerHost = 1;
    across.byHost = false;
    broadcast(*h.cross, data, bytes, place.cross, across);
  }
  BroadcastOptions within = options;
  within.model = nullptr;  // one host: the measured threshold
  within.byHost = false;
  broadcast(*h.local, data, bytes, place.local, within);
}

}  // namespace

bool runsHierarchicalBroadcast(const Comm& comm, std::size_t bytes,
                               const BroadcastOptions& options) {
  const Comm::Hierarchy* h = comm.hierarchy();
  if (!h || bytes == 0) return false;
  if (options.byHost) return true;
  if (!options.model || options.algorithm != BroadcastAlgorithm::Auto) return false;
  int perHost = h->local->size();
  if (perHost < 2 || h->cross->size() < 2) return false;
  CommShape shape{comm.size(), perHost};
  std::size_t segment = segmentLimit(comm, options.maxSegmentBytes);
  double staged = predictHierarchicalBroadcast(bytes, shape, *options.model, segment,
                                               options.pipelineThresholdBytes);
  return staged < predictBroadcast(fastestBroadcast(bytes, shape, *options.model, segment), bytes,
                                   shape, *options.model, segment);
}

const char* broadcastAlgorithmName(BroadcastAlgorithm algorithm) {
  switch (algorithm) {
    case BroadcastAlgorithm::Auto:
      return "auto";
    case BroadcastAlgorithm::BinomialTree:
      return "binomial_tree";
    case BroadcastAlgorithm::PipelinedChain:
      return "pipelined_chain";
    case BroadcastAlgorithm::ScatterAllgather:
      return "scatter_allgather";
  }
  return "unknown";
}

BroadcastAlgorithm chooseBroadcastAlgorithm(const Comm& comm, std::size_t bytes,
                                            const BroadcastOptions& options) {
  if (options.algorithm != BroadcastAlgorithm::Auto) return options.algorithm;
  if (comm.size() <= 2) return BroadcastAlgorithm::BinomialTree;
  if (options.model) {
    CommShape shape{comm.size(),
                    options.ranksPerHost ? options.ranksPerHost : options.model->ranksPerHost};
    if (shape.size > shape.ranksPerHost)
      return fastestBroadcast(bytes, shape, *options.model,
                              segmentLimit(comm, options.maxSegmentBytes));
  }
  return bytes >= options.pipelineThresholdBytes ? BroadcastAlgorithm::PipelinedChain
                                                 : BroadcastAlgorithm::BinomialTree;
}

void broadcast(Comm& comm, void* data, std::size_t bytes, int root,
               const BroadcastOptions& options) {
  int n = comm.size();
  if (root < 0 || root >= n)
    throw InvalidArgument(
        detail::concat("broadcast: root rank ", root, " is outside [0, ", n, ")"));
  Tag tag = makeTag(TagPrefix::Broadcast, comm.nextSequence());
  if (n == 1 || bytes == 0) return;
  auto* buf = static_cast<std::byte*>(data);
  if (runsHierarchicalBroadcast(comm, bytes, options))
    return hierarchicalBroadcast(*comm.hierarchy(), buf, bytes, root, options);
  BroadcastAlgorithm algorithm =
      n > 2 ? chooseBroadcastAlgorithm(comm, bytes, options) : BroadcastAlgorithm::BinomialTree;
  // Fewer bytes than ranks would leave blocks empty: the tree sends the few bytes as well.
  if (algorithm == BroadcastAlgorithm::ScatterAllgather && bytes < static_cast<std::size_t>(n))
    algorithm = BroadcastAlgorithm::BinomialTree;
  std::size_t segmentBytes = segmentLimit(comm, options.maxSegmentBytes);
  switch (algorithm) {
    case BroadcastAlgorithm::PipelinedChain:
      return pipelinedChain(comm, buf, bytes, root, tag, segmentBytes);
    case BroadcastAlgorithm::ScatterAllgather:
      return scatterAllgather(comm, buf, bytes, root, tag, segmentBytes);
    case BroadcastAlgorithm::BinomialTree:
    case BroadcastAlgorithm::Auto:
      break;
  }
  binomialTree(comm, buf, bytes, root, tag);
}

}  // namespace hvd::collectives
