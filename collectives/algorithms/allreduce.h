// Allreduce over a Comm: every rank ends with op(input of rank 0, ..., input of rank n-1),
// bit-identical on every rank.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/algorithms/dtype.h"
#include "collectives/transport/comm.h"
#include "collectives/transport/network_model.h"

namespace hvd::collectives {

// Which algorithm a flat allreduce runs (HVD_ALLREDUCE_ALGORITHM). Auto: chooseAllreduceAlgorithm
// decides per operation. The others force one: recursive doubling (log2 n rounds, log2 n * size
// bytes per rank), the ring (2(n-1) rounds, 2(n-1)/n * size) or Rabenseifner's (2 log2 n rounds,
// about 2(n-1)/n * size); see allreduce.cc and rabenseifner.cc.
enum class AllreduceAlgorithm { Auto, Ring, RecursiveDoubling, Rabenseifner };

// As HVD_ALLREDUCE_ALGORITHM spells them: auto, ring, recursive_doubling, rabenseifner.
const char* allreduceAlgorithmName(AllreduceAlgorithm algorithm);
// Throws InvalidArgument naming `name` and the valid names.
AllreduceAlgorithm parseAllreduceAlgorithm(const std::string& name);

// How the hierarchical form (a communicator with a Comm::Hierarchy) splits its work:
// - Blocks: a ring reduce-scatter within each host leaves local rank i with block i of the
//   host's sum; the ranks of local index i allreduce that block across hosts; a ring allgather
//   within each host. A host's NIC carries 2(H-1)/H of the payload: for bandwidth.
// - Whole: recursive doubling within each host leaves every local rank with the host's sum;
//   every local rank's column then allreduces the whole payload across hosts at once. That is
//   log2 L + log2 H rounds, as many as flat recursive doubling, but the host's rounds go over
//   shared memory where a flat algorithm's go through TCP, and half as many as Blocks' rings
//   take within the host; each NIC carries L times the payload: for latency.
// Auto: the one the cost model predicts faster (Blocks without a model).
enum class HierarchicalStaging { Auto, Blocks, Whole };

struct AllreduceOptions {
  // Largest message of the ring, which is pipelined in segments (about a quarter of a block,
  // at least 128 KiB, at most this) so that sending, receiving and reducing overlap; 0: the
  // communicator's pipelineSegmentBytes(). Tests set it tiny to reach multi-segment paths.
  std::size_t maxSegmentBytes = 0;
  // With algorithm Auto, payloads below this use recursive doubling (log2 n rounds,
  // latency-optimal); larger ones use the ring (2(n-1) rounds, bandwidth-optimal).
  std::size_t ringThresholdBytes = 128 * 1024;
  double prescale = 1.0;   // applied to the input before reducing
  double postscale = 1.0;  // applied to the result (Average additionally divides by n)
  // Forces the algorithm of a flat allreduce. A communicator with a hierarchy for allreduce
  // still runs the hierarchical form; its stage across hosts takes this choice.
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Auto;
  // The cluster as Auto's cost model sees it (cost_model.h), or null. Not owned.
  const NetworkModel* model = nullptr;
  // The communicator's shape for the model: consecutive ranks per host (0: the model's), and
  // how many of a host's ranks use its NIC at once (0: all of them). The hierarchical form's
  // stage across hosts is one rank per host, with every local rank's column crossing at once.
  int ranksPerHost = 0;
  int nicSharing = 0;
  // The hierarchical form's split; tests force each to run both through the matrix.
  HierarchicalStaging staging = HierarchicalStaging::Auto;
};

// Auto's rule: the algorithm for a flat allreduce of `bytes` over `comm` (never Auto). With a
// model that holds a table measured for the communicator's link, size and ranks per host
// (hvd-bench calibrate), the fastest in it; else, on a communicator that spans hosts, the one
// the cost model predicts fastest; within one host, recursive doubling below
// options.ringThresholdBytes and the ring from there on.
AllreduceAlgorithm chooseAllreduceAlgorithm(const Comm& comm, std::size_t bytes,
                                            const AllreduceOptions& options);

// Whether an allreduce of `bytes` over `comm` runs in stages across hosts: always where the
// communicator's hierarchy says so (--hierarchical-allreduce), and, where it leaves the choice to
// the model, when the algorithm is Auto and the cost model predicts the staged form faster than
// the best flat algorithm. The same on every rank, as the hierarchy, options and model are.
bool runsHierarchicalAllreduce(const Comm& comm, std::size_t bytes,
                               const AllreduceOptions& options);

// `input` may equal `output` (in place). Blocks until done; throws IoError/TimeoutError naming
// the peer, InvalidArgument for an op or scale the dtype does not support.
void allreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
               ReduceOp op, const AllreduceOptions& options = {});

}  // namespace hvd::collectives
