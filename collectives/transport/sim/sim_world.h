// A simulated cluster in one thread: N ranks, each a fiber (Boost.Context) with its own virtual
// clock, joined by simulated connections whose message times come from a NetworkModel. The real
// algorithm code runs on their Comms unchanged; what it sends is delivered (and copied, unless
// the simulation is timing-only), and what it reduces is charged at the model's reduction rate
// (transport/work_meter.h).
//
// Time. A discrete-event scheduler resumes ranks in virtual-time order: a rank runs until it
// waits (Request::wait -> ProgressEngine::progressUntil) or reduces, and is resumed when the
// earliest of its pending operations completes. A message of b bytes posted at time t takes
// every resource on its path (the sender's and receiver's copy ports and the host's memory
// within a host; the hosts' NICs, the receiving host's memory as the model's nicMemoryCopies
// say, and any switch uplinks between hosts): each carries it for
// b / its bandwidth from when it is free (after t) and serves messages in the order they were
// posted; the message arrives `latency` after the last resource has carried it. Within a host,
// the link is the TCP loopback on a communicator that spans several hosts (hvd links those with
// TCP alone) and shared memory otherwise (a world of one host; the hierarchical form's
// communicators within a host). A receive completes when both the message has arrived and the
// receive was posted.
//
// Failure. A rank's exception ends that rank; ranks left waiting for messages that can never
// come (the event queue is empty) get a TimeoutError naming every stuck rank and the messages it
// waits for: a simulated deadlock is reported, never hangs. A message whose tag or size differs
// from the receive it meets fails that receive (InternalError), as the real transports do.
//
// Thread model: a SimWorld and its Comms are used by one thread, the one calling run().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/transport/comm.h"
#include "collectives/transport/network_model.h"

namespace hvd::collectives::sim {

struct SimOptions {
  NetworkModel model;
  // false: timing only. Messages carry no bytes and reductions are charged but not done, so
  // buffers may be garbage (or shared between ranks) and large sizes cost no real memory traffic.
  bool moveData = true;
  // Give every Comm a Comm::Hierarchy by the model's ranksPerHost (when the world is a whole
  // number of hosts of more than one rank), with these stages on.
  bool hierarchicalAllreduce = false;
  bool hierarchicalAllgather = false;
  // Or let Auto's cost model choose the staged allreduce size by size, as the runtime does by
  // default for jobs of several hosts of several ranks.
  bool hierarchicalAllreduceByModel = false;
  std::size_t stackBytes = 256 * 1024;  // per rank fiber
};

struct SimRun {
  std::vector<double> finishSeconds;  // per rank, in virtual time from the run's start
  double seconds = 0;                 // the last rank's finish
  uint64_t messages = 0;
  uint64_t bytes = 0;  // sent, all ranks together
};

class SimWorld {
 public:
  SimWorld(int size, SimOptions options);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  int size() const;
  const SimOptions& options() const;

  // Runs fn(comm) on every rank from virtual time 0 (the ranks' Comms persist between runs, as a
  // job's do between operations). Throws the error of the rank that failed first in virtual time,
  // or a deadlock's TimeoutError when no rank failed otherwise.
  SimRun run(const std::function<void(Comm&)>& fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvd::collectives::sim
