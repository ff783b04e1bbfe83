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

// Collective over the job's `size` ranks: how many of them run on this rank's kernel `kernel`
// (kernelId(); "" counts as unknown: `localSize` is returned, and the rank still takes part).
// Four requests to `store` under `prefix` (a key per kernel, and a count of the ranks that have
// counted); waits up to `timeout` for every rank to count (StoreTimeout then says how many did).
int ranksOnKernel(rendezvous::Store& store, const std::string& prefix, const std::string& kernel,
                  int size, int localSize, std::chrono::milliseconds timeout);

}  // namespace hvd::runtime
