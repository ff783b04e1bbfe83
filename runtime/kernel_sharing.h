// Ranks whose host names differ can still run on one kernel: the pods of a Kubernetes node, the
// network namespaces that stand in for hosts in tests and benchmarks. They take turns on the
// same CPUs, which no host name shows, so a rank of a job across hosts counts them through the
// rendezvous store before it decides how its links wait (runtime/link_waits.h).
#pragma once

#include <chrono>
#include <string>

#include "collectives/rendezvous/store.h"

namespace hvd::runtime {

// This kernel's identity since boot (/proc/sys/kernel/random/boot_id), or "" where unreadable.
std::string kernelId();

// Collective over the job's `size` ranks: how many of them run on the kernel `kernel` of this
// rank `rank` (kernelId(); "" counts as unknown: `localSize` is returned, and the rank still
// takes part). The ranks' kernels are gathered through `store` under `prefix`
// (rendezvous::gatherRankTable: RankTableTimeout names the ranks missing after `timeout`).
int ranksOnKernel(rendezvous::Store& store, const std::string& prefix, const std::string& kernel,
                  int rank, int size, int localSize, std::chrono::milliseconds timeout);

}  // namespace hvd::runtime
