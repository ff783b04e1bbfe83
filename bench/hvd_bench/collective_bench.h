// hvd-bench's measurement, after nccl-tests: for each size of a sweep, warm up, time
// out-of-place and in-place runs, average the time across ranks, and check the result on
// closed-form data. Runs inside every rank (collective calls), results are the same on every
// rank.
#pragma once

#include <string>
#include <vector>

#include "collectives/algorithms/dtype.h"
#include "runtime/blocking_collectives.h"

namespace hvd::bench {

enum class Collective { Allreduce, Allgather, Broadcast, Alltoall, Reducescatter, Barrier };
// Which of a row's two runs to time: a caller that reads one column (bench/fake_hosts.py reads
// out of place) halves the sweep, which at 64 ranks on 2 cores is seconds per size.
enum class Placement { Both, OutOfPlace, InPlace };

struct BenchOptions {
  Collective op = Collective::Allreduce;
  collectives::DType dtype = collectives::DType::Float32;
  collectives::ReduceOp redop = collectives::ReduceOp::Sum;
  std::size_t minBytes = 8;
  std::size_t maxBytes = 64u << 20;
  double stepFactor = 2;  // multiply the size by this each row (0: use stepBytes)
  std::size_t stepBytes = 0;
  int warmup = 5;
  int iterations = 20;
  int root = 0;
  bool check = true;
  Placement placement = Placement::Both;
};

struct Timing {
  bool measured = false;  // false: not applicable (e.g. in-place alltoall)
  double timeUs = 0;
  double algBw = 0;  // GB/s
  double busBw = 0;  // GB/s
  long wrong = -1;   // -1: not checked
};

struct Row {
  std::size_t bytes = 0;
  std::size_t count = 0;  // elements per rank's buffer, as nccl-tests counts them
  Timing outOfPlace, inPlace;
};

Collective parseCollective(const std::string& name);  // throws InvalidArgument
Placement parsePlacement(const std::string& name);    // both, out, in; throws InvalidArgument
const char* collectiveName(Collective c);
// nccl-tests' bus bandwidth factor for `n` ranks.
double busBandwidthFactor(Collective c, int n);

std::vector<Row> runSweep(runtime::BlockingCollectives& rt, const BenchOptions& options);

}  // namespace hvd::bench
