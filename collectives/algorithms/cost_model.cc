#include "collectives/algorithms/cost_model.h"

#include <algorithm>
#include <cmath>

#include "collectives/algorithms/ring_allreduce.h"
#include "common/error.h"

namespace hvd::collectives {
namespace {

// The ring's largest segment when the transport does not say (Comm::pipelineSegmentBytes).
constexpr std::size_t kSegmentLimit = 512 * 1024;

// One round of messages: every rank sends `bytes` at once. `cross`: to another host, where
// `sharing` ranks of a host use its NIC together, and each byte received costs the host's
// memory nicMemoryCopies; within a host all of its ranks copy at once, over `within`, and
// share its memory bandwidth.
struct Rounds {
  const NetworkModel& m;
  int ranksPerHost;
  int nicSharing;           // how many of a host's ranks cross at once in a cross-host round
  const LinkModel& within;  // between ranks of one host (NetworkModel::sameHostLink)

  double round(bool cross, double bytes) const {
    if (cross) return m.interHost.latencySeconds + nicSharing * bytes * nicPerByte();
    return within.latencySeconds + std::max(bytes / within.bytesPerSecond,
                                            ranksPerHost * bytes / m.hostMemoryBytesPerSecond);
  }
  // Whether a round whose partners are r and r XOR `distance` (a power of two) has a pair on
  // different hosts, consecutive ranks sharing one: none does only when host boundaries fall
  // on multiples of 2 * distance (hosts of 3 ranks cross hosts already at distance 1).
  bool crosses(int distance, int size) const {
    return size > ranksPerHost && ranksPerHost % (2 * distance) != 0;
  }
  double reduce(double bytes) const { return m.reduceSeconds(bytes); }
  // Seconds per byte a host receives from another: the NIC's time, or its copy through the
  // receiving host's memory.
  double nicPerByte() const {
    return std::max(1 / m.interHost.bytesPerSecond, m.nicMemoryCopies / m.hostMemoryBytesPerSecond);
  }
};

int powerOfTwoBelow(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Recursive doubling (allreduce.cc): ranks >= p fold into rank r - p and get the result back;
// log2 p exchanges of the whole buffer, nearest partner first, each followed by a reduction.
double recursiveDoubling(double s, int n, const Rounds& r) {
  int p = powerOfTwoBelow(n);
  double t = 0;
  for (int d = 1; d < p; d *= 2) t += r.round(r.crosses(d, n), s) + r.reduce(s);
  // The fold costs a round; the unfold only its bytes: the ranks that did not fold sent their
  // first round's data at once, so the folding ranks finish their rounds a latency early.
  if (n > p) {
    bool cross = r.crosses(p, n);
    t += r.round(cross, s) + r.reduce(s) + r.round(cross, s) - r.round(cross, 0);
  }
  return t;
}

// Rabenseifner (rabenseifner.cc): neighbours fold in pairs, then recursive halving and
// doubling, exchanging s / 2d with the partner at distance d.
double rabenseifner(double s, int n, const Rounds& r) {
  int p = powerOfTwoBelow(n);
  double t = 0;
  for (int d = 1; d < p; d *= 2) {
    double part = s / (2.0 * d);
    t += 2 * r.round(r.crosses(d, n), part) + r.reduce(part);
  }
  if (n > p) t += 2 * r.round(r.crosses(1, n), s) + r.reduce(s);
  return t;
}

// The pipelined ring: 2(n-1) steps of a block of s / n, cut into segments. In a step every
// host sends one block across (its last rank's) and its other ranks one block each within it.
// Each rank's link carries all 2(n-1) blocks one after the other, while the first segment's
// chain of 2(n-1) hops bounds it from below when the blocks are small.
struct RingPass {
  double seconds;   // the transfers of `steps` steps
  double segments;  // per block
};

RingPass ringPass(double s, int n, const Rounds& r, double steps, std::size_t segmentLimitBytes) {
  double block = s / n;
  double segment = std::min(block, static_cast<double>(ringSegmentBytes(static_cast<std::size_t>(s),
                                                                        n, segmentLimitBytes)));
  double segments = std::ceil(block / segment);
  // Within a host, all but one of its ranks copy a block each step.
  double latency = r.within.latencySeconds;
  double perByte =
      std::max(1 / r.within.bytesPerSecond, (r.ranksPerHost - 1) / r.m.hostMemoryBytesPerSecond);
  if (n > r.ranksPerHost) {
    // A flat ring crosses each host's NIC once per step, so its first segment's chain pays the
    // NIC's latency on one hop of every ranksPerHost; a ring of one rank per host (the
    // hierarchical form's stage across hosts) runs beside the other local ranks' rings. A host
    // receives a block from across in each step, which its memory copies besides its ranks'
    // copies within it.
    latency = ((r.ranksPerHost - 1) * latency + r.m.interHost.latencySeconds) / r.ranksPerHost;
    perByte =
        r.ranksPerHost > 1
            ? std::max({perByte, 1 / r.m.interHost.bytesPerSecond,
                        (r.ranksPerHost - 1 + r.m.nicMemoryCopies) / r.m.hostMemoryBytesPerSecond})
            : r.nicSharing * r.nicPerByte();
  }
  return {std::max(steps * block * perByte + latency, steps * (latency + segment * perByte)),
          segments};
}

double ring(double s, int n, const Rounds& r) {
  RingPass pass = ringPass(s, n, r, 2.0 * (n - 1), kSegmentLimit);
  // A segment is reduced while the next one arrives: with several segments per block the
  // reductions and the transfers overlap, but for one segment they alternate.
  double reductions = (n - 1) * r.reduce(s / n);
  return std::max(pass.seconds, reductions) + std::min(pass.seconds, reductions) / pass.segments;
}

double flat(AllreduceAlgorithm algorithm, double s, int n, const Rounds& r) {
  if (n <= 1) return 0;
  switch (algorithm) {
    case AllreduceAlgorithm::RecursiveDoubling:
      return recursiveDoubling(s, n, r);
    case AllreduceAlgorithm::Rabenseifner:
      return rabenseifner(s, n, r);
    case AllreduceAlgorithm::Ring:
      return ring(s, n, r);
    case AllreduceAlgorithm::Auto:
      break;
  }
  throw InvalidArgument("predictAllreduce: auto is a choice, not an algorithm");
}

constexpr AllreduceAlgorithm kCandidates[] = {AllreduceAlgorithm::RecursiveDoubling,
                                              AllreduceAlgorithm::Ring,
                                              AllreduceAlgorithm::Rabenseifner};

}  // namespace

double predictAllreduce(AllreduceAlgorithm algorithm, std::size_t bytes, const CommShape& shape,
                        const NetworkModel& model) {
  int perHost = std::min(shape.ranksPerHost, shape.size);
  Rounds r{model, perHost, shape.nicSharing > 0 ? shape.nicSharing : perHost,
           model.sameHostLink(shape.size > perHost)};
  return flat(algorithm, static_cast<double>(bytes), shape.size, r);
}

double predictHierarchicalAllreduce(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model, HierarchicalStaging staging) {
  int l = shape.ranksPerHost, hosts = shape.size / std::max(1, l);
  HVD_ENFORCE(l > 1 && hosts > 1 && hosts * l == shape.size,
              "hierarchical allreduce needs whole hosts of several ranks: ", shape.size, " ranks, ",
              l, " per host");
  if (staging == HierarchicalStaging::Auto)
    return std::min(predictHierarchicalAllreduce(bytes, shape, model, HierarchicalStaging::Blocks),
                    predictHierarchicalAllreduce(bytes, shape, model, HierarchicalStaging::Whole));
  double s = static_cast<double>(bytes);
  Rounds within{model, l, l, model.intraHost};
  // Across hosts, every local rank's column at once: l ranks share each NIC.
  Rounds across{model, 1, l, model.intraHost};
  auto bestAcross = [&](double payload) {
    double best = INFINITY;
    for (AllreduceAlgorithm a : kCandidates) best = std::min(best, flat(a, payload, hosts, across));
    return best;
  };
  if (staging == HierarchicalStaging::Whole) return recursiveDoubling(s, l, within) + bestAcross(s);
  // A ring reduce-scatter and a ring allgather within the host: (l-1) steps of s / l each.
  double block = s / l;
  double local = 2 * (l - 1) * within.round(false, block) + (l - 1) * within.reduce(block);
  return local + bestAcross(block);
}

HierarchicalStaging fastestStaging(std::size_t bytes, const CommShape& shape,
                                   const NetworkModel& model) {
  return predictHierarchicalAllreduce(bytes, shape, model, HierarchicalStaging::Whole) <
                 predictHierarchicalAllreduce(bytes, shape, model, HierarchicalStaging::Blocks)
             ? HierarchicalStaging::Whole
             : HierarchicalStaging::Blocks;
}

double allreduceLowerBound(std::size_t bytes, const CommShape& shape, const NetworkModel& model) {
  int n = shape.size;
  if (n <= 1) return 0;
  int l = std::min(shape.ranksPerHost, n);
  int hosts = (n + l - 1) / l;
  double s = static_cast<double>(bytes);
  double latency =
      std::ceil(std::log2(static_cast<double>(hosts))) * model.interHost.latencySeconds +
      std::ceil(std::log2(static_cast<double>(l))) * model.intraHost.latencySeconds;
  // Every rank receives at least 2(n-1)/n of the payload (reduce-scatter's share, then the
  // allgather's), through its copy port or its host's NIC; and a host's NIC carries at least
  // 2(H-1)/H of it. All of a host's ranks' bytes come through its memory, or its NIC, where a
  // byte costs the receiving host's memory c = nicMemoryCopies: so its memory carries at least
  // R - (1 - c) x of the R bytes its ranks receive, x of them through its NIC: for c >= 1 all of
  // R, below that R over memory and (1 - c) NIC bandwidth together (c = 0: NIC free to memory).
  // A host's share is the average's, n / hosts ranks (the last host may have fewer than l); a
  // rank copies within its host at the faster of its two links.
  double nic = hosts > 1 ? model.interHost.bytesPerSecond : 0;
  double received = 2.0 * (n - 1) / n * s;
  double copy = std::max(model.intraHost.bytesPerSecond, model.sameHostTcp.bytesPerSecond);
  double perRank = received / (copy + nic);
  double bypass = std::max(0.0, 1 - model.nicMemoryCopies) * nic;
  double perHost = received * n / hosts / (model.hostMemoryBytesPerSecond + bypass);
  double acrossHosts = hosts > 1 ? 2.0 * (hosts - 1) / hosts * s / nic : 0;
  // A rank can reduce one segment while the next arrives, so the reductions bound the time
  // beside the transfers, not on top of them.
  return latency +
         std::max({perRank, perHost, acrossHosts, (n - 1.0) / n * model.reduceSeconds(s)});
}

AllreduceAlgorithm measuredFastestAllreduce(std::size_t bytes, const std::string& link, int ranks,
                                            int ranksPerHost, const NetworkModel& model) {
  const MeasuredAllreduce* table = model.measured(link, ranks, ranksPerHost);
  if (!table) return AllreduceAlgorithm::Auto;
  // Below the table latency decides, where recursive doubling's single round is the least.
  if (static_cast<double>(bytes) < table->bytes.front())
    return AllreduceAlgorithm::RecursiveDoubling;
  switch (table->fastestAt(static_cast<double>(bytes))) {
    case TimedAlgorithm::RecursiveDoubling:
      return AllreduceAlgorithm::RecursiveDoubling;
    case TimedAlgorithm::Ring:
      return AllreduceAlgorithm::Ring;
    case TimedAlgorithm::Rabenseifner:
      return AllreduceAlgorithm::Rabenseifner;
  }
  return AllreduceAlgorithm::Auto;
}

AllreduceAlgorithm fastestAllreduce(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model) {
  AllreduceAlgorithm best = AllreduceAlgorithm::RecursiveDoubling;
  double bestTime = INFINITY;
  for (AllreduceAlgorithm a : kCandidates) {
    double t = predictAllreduce(a, bytes, shape, model);
    if (t < bestTime) {
      best = a;
      bestTime = t;
    }
  }
  return best;
}

double predictBroadcast(BroadcastAlgorithm algorithm, std::size_t bytes, const CommShape& shape,
                        const NetworkModel& model, std::size_t segmentBytes) {
  int n = shape.size;
  if (n <= 1 || bytes == 0) return 0;
  int perHost = std::min(shape.ranksPerHost, n);
  const LinkModel& within = model.sameHostLink(n > perHost);
  Rounds r{model, perHost, 1, within};
  double s = static_cast<double>(bytes);
  auto hop = [&](bool cross, double b) {
    return cross ? model.interHost.latencySeconds + b * r.nicPerByte()
                 : within.latencySeconds + b / within.bytesPerSecond;
  };
  // Fewer bytes than ranks would leave scatter-allgather's blocks empty: broadcast runs the tree.
  if (algorithm == BroadcastAlgorithm::ScatterAllgather && bytes < static_cast<std::size_t>(n))
    algorithm = BroadcastAlgorithm::BinomialTree;
  if (algorithm == BroadcastAlgorithm::BinomialTree || n == 2) {
    double t = 0;
    for (int d = 1; d < n; d *= 2) t += hop(r.crosses(d, n), s);
    return t;
  }
  if (algorithm == BroadcastAlgorithm::ScatterAllgather) {
    // The scatter's path to its last rank: distance d carries d blocks of s / n; then the ring.
    double t = 0;
    for (int d = 1; d < n; d *= 2) t += hop(r.crosses(d, n), s * d / n);
    return t + ringPass(s, n, r, n - 1.0, segmentBytes).seconds;
  }
  if (algorithm != BroadcastAlgorithm::PipelinedChain)
    throw InvalidArgument("predictBroadcast: auto is a choice, not an algorithm");
  double segment = std::min(s, static_cast<double>(std::max<std::size_t>(1, segmentBytes)));
  double segments = std::ceil(s / segment);
  int hosts = (n + perHost - 1) / perHost;
  int crossHops = hosts - 1, withinHops = n - 1 - crossHops;
  double fill = crossHops * hop(true, segment) + withinHops * hop(false, segment);
  // A host's memory copies each segment for its other ranks, and, where the chain crosses
  // hosts, once more as its first rank receives it through the NIC.
  double slowest = 0, memoryCopies = perHost - 1;
  if (crossHops > 0) {
    slowest = segment * r.nicPerByte();
    memoryCopies += model.nicMemoryCopies;
  }
  if (withinHops > 0)
    slowest = std::max({slowest, segment / within.bytesPerSecond,
                        memoryCopies * segment / model.hostMemoryBytesPerSecond});
  return fill + (segments - 1) * slowest;
}

BroadcastAlgorithm fastestBroadcast(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model, std::size_t segmentBytes) {
  BroadcastAlgorithm best = BroadcastAlgorithm::BinomialTree;
  double bestTime = predictBroadcast(best, bytes, shape, model, segmentBytes);
  for (BroadcastAlgorithm a :
       {BroadcastAlgorithm::PipelinedChain, BroadcastAlgorithm::ScatterAllgather}) {
    double t = predictBroadcast(a, bytes, shape, model, segmentBytes);
    if (t < bestTime) best = a, bestTime = t;
  }
  return best;
}

double predictHierarchicalBroadcast(std::size_t bytes, const CommShape& shape,
                                    const NetworkModel& model, std::size_t segmentBytes,
                                    std::size_t pipelineThresholdBytes) {
  int l = shape.ranksPerHost, hosts = shape.size / std::max(1, l);
  HVD_ENFORCE(l > 1 && hosts > 1 && hosts * l == shape.size,
              "hierarchical broadcast needs whole hosts of several ranks: ", shape.size, " ranks, ",
              l, " per host");
  CommShape across{hosts, 1};
  double cross = predictBroadcast(fastestBroadcast(bytes, across, model, segmentBytes), bytes,
                                  across, model, segmentBytes);
  BroadcastAlgorithm local = l > 2 && bytes >= pipelineThresholdBytes
                                 ? BroadcastAlgorithm::PipelinedChain
                                 : BroadcastAlgorithm::BinomialTree;
  return cross + predictBroadcast(local, bytes, CommShape{l, l}, model, segmentBytes);
}

double broadcastLowerBound(std::size_t bytes, const CommShape& shape, const NetworkModel& model) {
  int n = shape.size;
  if (n <= 1 || bytes == 0) return 0;
  int perHost = std::min(shape.ranksPerHost, n);
  double s = static_cast<double>(bytes);
  if (n > perHost) return model.interHost.latencySeconds + s / model.interHost.bytesPerSecond;
  return model.intraHost.latencySeconds + s / model.intraHost.bytesPerSecond;
}

}  // namespace hvd::collectives
