// Allreduce, by the algorithm the options force, or else chosen by chooseAllreduceAlgorithm
// (today: by payload size, recursive doubling below the ring threshold):
// - Recursive doubling (small payloads): with p the largest power of two <= n, ranks r >= p
//   first fold their data into rank r-p; then in log2 p rounds rank r exchanges its whole buffer
//   with rank r xor 2^k and reduces; finally the folded ranks get the result back.
//   Rounds: log2 p (+2 when n is not a power of two). Bytes sent per rank: log2 p * size.
//   Every pair reduces the same two operands, and the ops are commutative, so all ranks end
//   bit-identical.
// - Ring (large payloads): reduce-scatter then allgather, pipelined by segment across steps
//   (ring_allreduce.h). Rounds: 2(n-1). Bytes sent per rank: 2(n-1)/n * size, which is optimal.
// - Rabenseifner's (forced only, for now): reduce-scatter by recursive halving, allgather by
//   recursive doubling (rabenseifner.h). Rounds: 2 log2 n (+2 for non-powers of two). Bytes
//   sent per rank: about 2(n-1)/n * size.
// - Hierarchical (a communicator with a Comm::Hierarchy: H hosts of L ranks each), split in
//   one of two ways (HierarchicalStaging). Blocks: a ring reduce-scatter among the ranks of
//   each host leaves local rank i with the host's reduction of block i; the ranks of local
//   index i on all hosts allreduce that block (by size, as above, or by the forced algorithm);
//   a ring allgather within each host puts the blocks back together. A host still sends
//   2(H-1)/H * size across the network, but over its L ranks' links at once, in 2(H-1) rounds
//   instead of 2(HL-1), and the 2(L-1) rounds within the host run over shared memory. Whole:
//   recursive doubling within each host, then every column allreduces the whole payload across
//   hosts: log2 L + log2 H rounds, for small payloads.
#include "collectives/algorithms/allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms/adasum.h"
#include "collectives/algorithms/cost_model.h"
#include "collectives/algorithms/rabenseifner.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/tags.h"

namespace hvd::collectives {
namespace {

void recursiveDoubling(Comm& comm, const std::byte* input, std::byte* data, std::size_t count,
                       DType dtype, ReduceOp op, Tag tag) {
  int n = comm.size(), r = comm.rank();
  std::size_t bytes = count * dtypeSize(dtype);
  auto deadline = comm.deadline();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  int extra = n - p;
  if (r >= p) {  // folded rank: hand the input over, get the result back
    Connection& partner = comm.peer(r - p);
    Request send = partner.isend({input, bytes}, tag);
    Request recv = partner.irecv({data, bytes}, tag);
    send.wait(deadline);
    recv.wait(deadline);
    return;
  }
  std::byte* scratch = comm.scratch(bytes);
  const std::byte* current = input;  // this rank's partial result so far
  // The send goes first: on shared memory it is done when isend returns, and by then the
  // partner's message may be in the ring, which irecv then takes at once, with no request.
  auto exchange = [&](Connection& partner, bool send) {
    Request out = send ? partner.isend({current, bytes}, tag) : Request();
    Request recv = partner.irecv({scratch, bytes}, tag);
    recv.wait(deadline);
    out.wait(deadline);
    reduce(data, current, scratch, count, dtype, op);
    current = data;
  };
  if (r < extra) exchange(comm.peer(r + p), false);
  for (int mask = 1; mask < p; mask <<= 1) exchange(comm.peer(r ^ mask), true);
  if (r < extra) comm.peer(r + p).isend({data, bytes}, tag).wait(deadline);
}

std::size_t segmentBytesFor(std::size_t bytes, const Comm& comm, const AllreduceOptions& options) {
  return ringSegmentBytes(bytes, comm.size(), segmentLimit(comm, options.maxSegmentBytes));
}

HierarchicalStaging stagingFor(std::size_t bytes, const AllreduceOptions& options, int worldSize,
                               int localSize) {
  if (options.staging != HierarchicalStaging::Auto) return options.staging;
  if (!options.model || localSize < 2) return HierarchicalStaging::Blocks;
  return fastestStaging(bytes, CommShape{worldSize, localSize, options.nicSharing}, *options.model);
}

void hierarchical(const Comm::Hierarchy& hierarchy, const std::byte* source, std::byte* data,
                  std::size_t count, DType dtype, ReduceOp op, const AllreduceOptions& options,
                  int worldSize) {
  Comm& local = *hierarchy.local;
  std::size_t elementSize = dtypeSize(dtype);
  std::size_t bytes = count * elementSize;
  // The stages reduce; the world's Average is taken once, on this rank's block.
  ReduceOp stageOp = op == ReduceOp::Average ? ReduceOp::Sum : op;
  Tag tag = makeTag(TagPrefix::Allreduce, local.nextSequence());
  AllreduceOptions crossOptions = options;
  crossOptions.prescale = crossOptions.postscale = 1.0;
  crossOptions.ranksPerHost = 1;
  crossOptions.nicSharing = local.size();
  if (stagingFor(bytes, options, worldSize, local.size()) == HierarchicalStaging::Whole) {
    // Recursive doubling leaves every local rank with the same bits, so every column reduces
    // the same operands across hosts and all ranks end bit-identical.
    if (local.size() > 1)
      recursiveDoubling(local, source, data, count, dtype, stageOp, tag);
    else if (source != data)
      std::memcpy(data, source, bytes);
    allreduce(*hierarchy.cross, data, data, count, dtype, stageOp, crossOptions);
    return finishAllreduce(data, count, dtype, op, worldSize, options.postscale);
  }
  Blocks blocks = evenBlocks(count, local.size());
  int me = local.rank();
  std::size_t segmentBytes = segmentBytesFor(bytes, local, options);
  // shift -1: local rank i ends holding block i.
  if (local.size() > 1)
    ringReduceScatter(local, source, data, blocks, dtype, stageOp, -1, segmentBytes, tag);
  else if (source != data)
    std::memcpy(data, source, bytes);
  std::byte* block = data + blocks.offsets[me] * elementSize;
  allreduce(*hierarchy.cross, block, block, blocks.counts[me], dtype, stageOp, crossOptions);
  finishAllreduce(block, blocks.counts[me], dtype, op, worldSize, options.postscale);
  if (local.size() > 1) ringAllgather(local, data, blocks, elementSize, 0, segmentBytes, tag);
}

void flatAllreduce(Comm& comm, const std::byte* source, std::byte* data, std::size_t count,
                   DType dtype, ReduceOp op, const AllreduceOptions& options, Tag tag) {
  std::size_t bytes = count * dtypeSize(dtype);
  AllreduceAlgorithm algorithm = options.algorithm == AllreduceAlgorithm::Auto
                                     ? chooseAllreduceAlgorithm(comm, bytes, options)
                                     : options.algorithm;
  switch (algorithm) {
    case AllreduceAlgorithm::Ring: {
      // The ring finishes (averages, postscales) each segment on the rank that completes it.
      Blocks blocks = evenBlocks(count, comm.size());
      return ringAllreduce(comm, source, data, blocks, dtype, op,
                           segmentBytesFor(bytes, comm, options), tag, options.postscale);
    }
    case AllreduceAlgorithm::Rabenseifner:
      // Finishes each block on the rank that completes it, as the ring does.
      return rabenseifnerAllreduce(comm, source, data, count, dtype, op, tag, options.postscale);
    case AllreduceAlgorithm::RecursiveDoubling:
    case AllreduceAlgorithm::Auto:
      break;
  }
  recursiveDoubling(comm, source, data, count, dtype, op, tag);
  finishAllreduce(data, count, dtype, op, comm.size(), options.postscale);
}

constexpr AllreduceAlgorithm kAlgorithms[] = {AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring,
                                              AllreduceAlgorithm::RecursiveDoubling,
                                              AllreduceAlgorithm::Rabenseifner};

}  // namespace

const char* allreduceAlgorithmName(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::Auto:
      return "auto";
    case AllreduceAlgorithm::Ring:
      return "ring";
    case AllreduceAlgorithm::RecursiveDoubling:
      return "recursive_doubling";
    case AllreduceAlgorithm::Rabenseifner:
      return "rabenseifner";
  }
  return "unknown";
}

AllreduceAlgorithm parseAllreduceAlgorithm(const std::string& name) {
  // Auto's measured tables parse a name per allreduce: no allocation on the way to a match.
  for (AllreduceAlgorithm a : kAlgorithms)
    if (name == allreduceAlgorithmName(a)) return a;
  std::string valid;
  for (AllreduceAlgorithm a : kAlgorithms)
    valid += (valid.empty() ? "" : ", ") + std::string(allreduceAlgorithmName(a));
  throw InvalidArgument("unknown allreduce algorithm '" + name + "' (use one of " + valid + ")");
}

AllreduceAlgorithm chooseAllreduceAlgorithm(const Comm& comm, std::size_t bytes,
                                            const AllreduceOptions& options) {
  if (options.model) {
    CommShape shape{comm.size(),
                    options.ranksPerHost ? options.ranksPerHost : options.model->ranksPerHost,
                    options.nicSharing};
    // A table measured on this layout, unless this is the cross-host stage of the staged form,
    // whose hosts' other ranks cross their NICs at the same time (a table of one rank per host
    // was measured without them).
    if (shape.nicSharing == 0 || shape.nicSharing == shape.ranksPerHost) {
      AllreduceAlgorithm measured = measuredFastestAllreduce(bytes, comm.linkName(), shape.size,
                                                             shape.ranksPerHost, *options.model);
      if (measured != AllreduceAlgorithm::Auto) return measured;
    }
    if (shape.size > shape.ranksPerHost) return fastestAllreduce(bytes, shape, *options.model);
  }
  if (comm.size() > 1 && bytes >= options.ringThresholdBytes) return AllreduceAlgorithm::Ring;
  return AllreduceAlgorithm::RecursiveDoubling;
}

bool runsHierarchicalAllreduce(const Comm& comm, std::size_t bytes,
                               const AllreduceOptions& options) {
  const Comm::Hierarchy* h = comm.hierarchy();
  if (!h) return false;
  if (h->allreduce) return true;
  if (!h->allreduceByModel || options.algorithm != AllreduceAlgorithm::Auto || !options.model)
    return false;
  CommShape shape{comm.size(), h->local->size(), options.nicSharing};
  double staged = predictHierarchicalAllreduce(bytes, shape, *options.model);
  return staged < predictAllreduce(fastestAllreduce(bytes, shape, *options.model), bytes, shape,
                                   *options.model);
}

void allreduce(Comm& comm, const void* input, void* output, std::size_t count, DType dtype,
               ReduceOp op, const AllreduceOptions& options) {
  if (op == ReduceOp::Adasum)
    return adasumAllreduce(comm, input, output, count, dtype, options.prescale, options.postscale);
  checkReducible(dtype, op);
  Tag tag = makeTag(TagPrefix::Allreduce, comm.nextSequence());
  if (count == 0) return;
  std::size_t bytes = count * dtypeSize(dtype);
  auto* data = static_cast<std::byte*>(output);
  const auto* source = static_cast<const std::byte*>(input);
  // Out of place, the algorithms read the input where it is; only a prescale (or a world of one)
  // needs the copy.
  if (options.prescale != 1.0 || comm.size() == 1) {
    if (input != output) std::memcpy(output, input, bytes);
    if (options.prescale != 1.0) scale(output, count, dtype, options.prescale);
    source = data;
  }
  if (runsHierarchicalAllreduce(comm, bytes, options)) {
    hierarchical(*comm.hierarchy(), source, data, count, dtype, op, options, comm.size());
    return;
  }
  if (comm.size() == 1) return finishAllreduce(output, count, dtype, op, 1, options.postscale);
  flatAllreduce(comm, source, data, count, dtype, op, options, tag);
}

}  // namespace hvd::collectives
