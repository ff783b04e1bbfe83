// hvd-bench calibrate: measures, on the job's own layout, each allreduce algorithm's time by
// size over the job's link, and on two ranks also the link itself and the reduction speed, and
// writes them into a network model (collectives/transport/network_model.h) that the simulator
// (hvd-bench simulate --model) and the runtime (HVD_NETWORK_MODEL, or this host's file within a
// host) read. Run under hvdrun: on one host it measures the links within a host (shared memory,
// or with --transport tcp the TCP loopback that a job of several hosts uses within each), on
// several hosts the links between them.
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

// Collective: every rank of a 2-rank job calls it. `rt` must run recursive doubling (one
// exchange of the whole buffer on two ranks, whose time is latency + bytes/bandwidth +
// bytes/reduction speed). `overTcp`: the ranks are linked by TCP (HVD_TRANSPORT=tcp).
Calibration calibrate(runtime::BlockingCollectives& rt, const collectives::NetworkModel& base,
                      bool overTcp);
void printCalibration(std::ostream& out, const Calibration& c);

// One runtime per algorithm it times, each forced to run that algorithm.
using AlgorithmRuns =
    std::vector<std::pair<collectives::AllreduceAlgorithm, runtime::BlockingCollectives*>>;
// Collective: times every algorithm of `runs` over the job's link (`link`, Comm::linkName) at
// 4 B, 64 B, 1 KiB, 4 KiB and 8 KiB to `largest` (at least 8 KiB) by factors of 2, in 5 rounds
// that alternate the algorithms at each size (the machine drifts); each time is the slowest
// rank's median. The table Auto then picks from on communicators of `ranks` ranks,
// `ranksPerHost` per host (NetworkModel::measuredAllreduce).
collectives::MeasuredAllreduce measureAllreduce(const AlgorithmRuns& runs, const std::string& link,
                                                int ranks, int ranksPerHost, std::size_t largest);
void printMeasuredAllreduce(std::ostream& out, const collectives::MeasuredAllreduce& table);

// Writes `model` as JSON to `path` (making its directory), aside and renamed over the file: a
// job starting meanwhile reads the old model or the new one, never half of one. Throws
// InvalidArgument naming the file it could not write or replace.
void saveModel(const std::string& path, const collectives::NetworkModel& model);

}  // namespace hvd::bench
