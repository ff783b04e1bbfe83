// Broadcast over a Comm: every rank ends with root's buffer.
#pragma once

#include <cstddef>

#include "collectives/transport/comm.h"
#include "collectives/transport/network_model.h"

namespace hvd::collectives {

// Which algorithm a broadcast runs: the binomial tree (ceil(log2 n) rounds of the whole
// payload), the pipelined chain (n-1 hops of segments, each rank receiving and forwarding at
// once: the payload's time once, plus a segment's time per hop), or scatter-allgather (van de
// Geijn's: a binomial scatter of n blocks, then a ring allgather; each rank receives about
// twice the payload, in ceil(log2 n) + n-1 rounds). Auto: chooseBroadcastAlgorithm.
enum class BroadcastAlgorithm { Auto, BinomialTree, PipelinedChain, ScatterAllgather };

const char* broadcastAlgorithmName(BroadcastAlgorithm algorithm);  // binomial_tree, ...

struct BroadcastOptions {
  std::size_t pipelineThresholdBytes = 256 * 1024;  // from here on, a pipelined chain
  std::size_t maxSegmentBytes = 0;  // the chain's largest message; 0: comm.pipelineSegmentBytes()
  BroadcastAlgorithm algorithm = BroadcastAlgorithm::Auto;
  // The cluster as the cost model sees it (cost_model.h), or null. Not owned.
  const NetworkModel* model = nullptr;
  int ranksPerHost = 0;  // consecutive ranks per host for the model (0: the model's)
  // Stage by host whenever the communicator has a hierarchy, whatever the model says (the
  // simulator's column for the staged form; tests).
  bool byHost = false;
};

// Auto's rule: with a model and a communicator that spans hosts, the algorithm the cost model
// predicts faster (a chain of 1,024 ranks pays 1,023 hops' latency, and a segment's time on each
// hop to fill, which a tree of 10 rounds does not); otherwise (within one host, where the
// threshold was measured) the tree below options.pipelineThresholdBytes and the chain from there.
// Never Auto; the tree for two ranks, where both are the same single message.
BroadcastAlgorithm chooseBroadcastAlgorithm(const Comm& comm, std::size_t bytes,
                                            const BroadcastOptions& options);

// Whether a broadcast of `bytes` over `comm` runs in stages: across hosts among the ranks of
// the root's local index, then within each host from that rank (shared memory there). Only
// with a Comm::Hierarchy, and then with options.byHost, or with algorithm Auto and a model that
// predicts the stages faster than the best flat algorithm; the same on every rank.
bool runsHierarchicalBroadcast(const Comm& comm, std::size_t bytes,
                               const BroadcastOptions& options);

// Throws InvalidArgument if root is outside [0, size).
void broadcast(Comm& comm, void* data, std::size_t bytes, int root,
               const BroadcastOptions& options = {});

}  // namespace hvd::collectives
