// Allgather with a different size per rank: rank r contributes blockBytes[r] bytes and every
// rank ends with all blocks concatenated in rank order.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::collectives {

// Auto: the hierarchical form where the communicator has one for allgather, else Bruck's where
// the blocks are small enough and its extra peers cost no memory (allgather.cc says how small
// and why), else the ring. The others force a flat one: the ring (n-1 rounds) or Bruck's
// (ceil(log2 n) rounds). Both send each rank the n-1 blocks it lacks once.
enum class AllgatherAlgorithm { Auto, Ring, Bruck };

// The largest message an allgather sends unless told otherwise.
inline constexpr std::size_t kAllgatherSegmentBytes = 512 * 1024;

// `output` holds the sum of blockBytes; `input` may alias this rank's block of `output`.
void allgatherv(Comm& comm, const void* input, void* output,
                const std::vector<std::size_t>& blockBytes,
                std::size_t segmentBytes = kAllgatherSegmentBytes,
                AllgatherAlgorithm algorithm = AllgatherAlgorithm::Auto);

// What Auto runs on a flat communicator of `n` ranks for blocks totalling `totalBytes`;
// `buffersPerPeer`: the communicator's Comm::buffersPerPeer.
AllgatherAlgorithm chooseFlatAllgather(int n, std::size_t totalBytes, bool buffersPerPeer = false);

}  // namespace hvd::collectives
