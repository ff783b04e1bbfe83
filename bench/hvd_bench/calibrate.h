// hvd-bench calibrate: measures the link between two ranks and the reduction speed, and, within
// a host, each allreduce algorithm's time by size over that link, and writes them into a
// network model (collectives/transport/network_model.h) that the simulator
// (hvd-bench simulate --model) and the runtime (HVD_NETWORK_MODEL) read. Run under hvdrun on
// two ranks: on one host it measures the link within a host (shared memory, or with
// --transport tcp the TCP loopback that a job of several hosts uses within each), on two hosts
// the link between them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collectives/algorithms/allreduce.h"
#include "collectives/transport/network_model.h"
#include "runtime/blocking_collectives.h"

namespace hvd::bench {

struct Calibration {
  bool sameHost = true;
  bool overTcp = false;     // within a host: the TCP link (NetworkModel::sameHostTcp)
  double smallSeconds = 0;  // median 4-byte allreduce
  double largeSeconds = 0;  // median allreduce of largeBytes
  double largeBytes = 0;
  double reduceBytesPerSecond = 0;
  collectives::NetworkModel model;  // `base` with the measured link and reduction speed
};

// Collective: every rank calls it. `rt` must run recursive doubling (one exchange of the whole
// buffer on two ranks, whose time is latency + bytes/bandwidth + bytes/reduction speed).
// `overTcp`: the ranks are linked by TCP (HVD_TRANSPORT=tcp).
Calibration calibrate(runtime::BlockingCollectives& rt, const collectives::NetworkModel& base,
                      bool overTcp);
void printCalibration(std::ostream& out, const Calibration& c);

// One runtime per algorithm it times, each forced to run that algorithm.
using AlgorithmRuns =
    std::vector<std::pair<collectives::AllreduceAlgorithm, runtime::BlockingCollectives*>>;
// Collective: times every algorithm of `runs` over the job's link (`link`, Comm::linkName) at
// 4 B, 64 B, 1 KiB, 4 KiB and 8 KiB to 16 MiB by factors of 2, in 5 rounds that alternate the
// algorithms at each size (the machine drifts); each time is the slowest rank's median. The table
// Auto then picks from within one host (NetworkModel::measuredAllreduce).
collectives::MeasuredAllreduce measureAllreduce(const AlgorithmRuns& runs, const std::string& link,
                                                int ranks);
void printMeasuredAllreduce(std::ostream& out, const collectives::MeasuredAllreduce& table);

}  // namespace hvd::bench
