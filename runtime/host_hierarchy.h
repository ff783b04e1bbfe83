// Hierarchical allreduce and allgather of host memory (HVD_HIERARCHICAL_ALLREDUCE=1,
// HVD_HIERARCHICAL_ALLGATHER=1) on a job spread over several hosts: the communicators that see
// the job as hosts (Comm::Hierarchy), attached to its global communicator so that every
// allreduce on it runs in three stages and every allgather in two
// (collectives/algorithms/allreduce.cc, allgather.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"
#include "collectives/transport/comm.h"
#include "collectives/transport/wait_policy.h"
#include "runtime/config.h"
#include "runtime/engine/host_layout.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::runtime {

// Collective over `data`, on every rank of a job on several hosts (config.topology), whatever
// the settings: the ranks exchange their host names and settings, so that a rank whose
// HVD_HIERARCHICAL_ALLREDUCE or HVD_HIERARCHICAL_ALLGATHER differs from the others fails
// everywhere with InvalidArgument naming the ranks, instead of running a different algorithm.
// With a setting on and as many ranks on every host, connects the ranks of this host through the
// transport table (runtime/transport_table.h: shared memory unless HVD_TRANSPORT=tcp or it is
// unavailable there; else this host's links of `data`)
// and attaches them with the cross-host subset of `data`. Uneven hosts keep the flat
// collectives, with a warning from rank 0. Logs through `logs` (the Runtime's).
// What the allreduce cost model assumes of the job's hosts, the same on every rank.
struct HostShape {
  int ranksPerHost = 1;  // of the exchanged layout when every host has as many, else 1
  int coresPerHost = 0;  // the fewest online CPUs of any rank's host
  std::vector<std::string> hostOfRank;  // every rank's host name, by rank
  bool even = true;                     // every host has as many ranks
};

// Returns the job's HostShape.
HostShape attachHostHierarchy(const Config& config, collectives::Comm& data,
                              rendezvous::Store& store, const std::string& scopePrefix,
                              collectives::WaitPolicy waits,
                              const std::shared_ptr<log::Logs>& logs);

}  // namespace hvd::runtime
