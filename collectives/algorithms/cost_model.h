// Predicted times of the allreduce algorithms, from a NetworkModel (α, β per link, γ) and the
// shape of the communicator (ranks, ranks per host), and the choice of the fastest. The formulas
// follow each algorithm's rounds as allreduce.cc, rabenseifner.cc and ring_allreduce.cc run them:
// which rounds stay within a host (partners closer than ranksPerHost, as launchers place
// consecutive ranks on one host), over which link (a communicator that spans several hosts is
// TCP throughout, also within a host; the hierarchical form's stages within a host are shared
// memory), and how many of a host's ranks share its NIC in a round.
// The simulated transport (transport/sim) runs the same algorithms on the same model, which is
// how these predictions are checked (bench: hvd-bench simulate).
#pragma once

#include <cstddef>
#include <string>

#include "collectives/algorithms/allreduce.h"
#include "collectives/algorithms/broadcast.h"
#include "collectives/transport/network_model.h"

namespace hvd::collectives {

// What the chooser knows of a communicator.
struct CommShape {
  int size = 1;
  int ranksPerHost = 1;  // consecutive ranks share a host
  int nicSharing = 0;    // a host's ranks that cross its NIC at once (0: ranksPerHost)
};

// Seconds for a flat allreduce of `bytes` by `algorithm` (not Auto). `segmentBytes`: the ring's
// pipeline segment (AllreduceOptions' rule).
double predictAllreduce(AllreduceAlgorithm algorithm, std::size_t bytes, const CommShape& shape,
                        const NetworkModel& model);
// The hierarchical form split as `staging` says (allreduce.h), with the best flat algorithm
// across hosts; Auto: the faster split. Needs size a multiple of ranksPerHost > 1.
double predictHierarchicalAllreduce(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model,
                                    HierarchicalStaging staging = HierarchicalStaging::Auto);
// The split with the least predicted time (ties: Blocks).
HierarchicalStaging fastestStaging(std::size_t bytes, const CommShape& shape,
                                   const NetworkModel& model);
// The α-β-γ lower bound: ceil(log2 H) inter-host and ceil(log2 L) intra-host latencies; the
// largest of the bandwidth bounds (each rank receives 2(n-1)/n of the payload through its copy
// port and its NIC share; a host's ranks, n / H on average, receive that each through its
// memory, or its NIC where a NIC byte costs the receiving host's memory under a copy; a host's
// NIC carries 2(H-1)/H of it) and of the time to reduce (n-1)/n of the payload, which
// overlaps with the transfers (so this is below the textbook α+β+γ sum).
double allreduceLowerBound(std::size_t bytes, const CommShape& shape, const NetworkModel& model);

// The flat algorithm with the least predicted time (ties: the simpler one, in the order
// recursive doubling, ring, Rabenseifner).
AllreduceAlgorithm fastestAllreduce(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model);

// Auto's pick from the model's measured table for `link`, `ranks` and `ranksPerHost`
// (NetworkModel::measuredAllreduce): the algorithm with the least time at `bytes`, each
// interpolated between the measured sizes around it (log-log) and held beyond the largest;
// recursive doubling below the smallest (latency decides there); Auto where no table matches.
AllreduceAlgorithm measuredFastestAllreduce(std::size_t bytes, const std::string& link, int ranks,
                                            int ranksPerHost, const NetworkModel& model);

// Seconds for a broadcast of `bytes` from rank 0 by `algorithm` (not Auto); `segmentBytes`: the
// pipeline segment (the chain's, and the limit of the ring allgather's). The tree's time is the
// path to its last rank: one send of the payload per round, across hosts while the distance is a
// host or more, within a host after. The chain's is its first segment's n-1 hops, then one
// segment per remaining segment through its slowest resource (a NIC, a rank's copy, or a host's
// memory, which its L-1 hops share). Scatter-allgather's: the scatter's path to its last rank
// (distance d carries d of the n blocks), then the ring allgather as the allreduce ring's second
// half.
double predictBroadcast(BroadcastAlgorithm algorithm, std::size_t bytes, const CommShape& shape,
                        const NetworkModel& model, std::size_t segmentBytes);
// The fastest (ties: the tree, which is also what scatter-allgather runs for fewer bytes than
// ranks).
BroadcastAlgorithm fastestBroadcast(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model, std::size_t segmentBytes);
// The broadcast staged by host (broadcast.h): the best algorithm across hosts among one rank
// per host, then within each host over its own links (shared memory) by the size threshold, as
// the runtime runs a broadcast within one host. Needs size a multiple of ranksPerHost > 1.
double predictHierarchicalBroadcast(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model, std::size_t segmentBytes,
                                    std::size_t pipelineThresholdBytes);
// A lower bound for any broadcast: a latency of each kind of link the data must cross, and the
// payload's time through the slowest resource every byte must pass: each other host's NIC, or,
// on one host, a rank's copy.
double broadcastLowerBound(std::size_t bytes, const CommShape& shape, const NetworkModel& model);

}  // namespace hvd::collectives
