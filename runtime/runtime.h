// Everything one worker's hvd runtime owns: configuration, the rendezvous client and the
// communicator. No process-wide state: a test can build several Runtimes in one process.
// Thread model: the blocking collectives may be called from one thread at a time (the caller
// serialises them); the topology getters from any thread.
#pragma once

#include <memory>

#include "collectives/algorithms/dtype.h"
#include "collectives/operations.h"
#include "collectives/rendezvous/store.h"
#include "collectives/transport/comm.h"
#include "runtime/config.h"

namespace hvd::runtime {

class Runtime {
 public:
  // Joins the rendezvous and connects to every peer. Throws InvalidArgument for a bad
  // configuration, TimeoutError naming the missing ranks, IoError for an unreachable server.
  static std::unique_ptr<Runtime> create(const Config& config);
  // Same, but scoped to an existing store (used by in-process tests).
  static std::unique_ptr<Runtime> create(const Config& config, rendezvous::Store& store);
  ~Runtime();

  const Topology& topology() const { return config_.topology; }
  const Config& config() const { return config_; }

  // The collectives (collectives/operations.h), with the algorithm settings of the Config.
  void allreduce(const collectives::Tensor& input, const collectives::Tensor& output,
                 collectives::ReduceOp op, double prescale = 1.0, double postscale = 1.0);
  void broadcast(const collectives::Tensor& tensor, int root);
  collectives::Tensor allgather(const collectives::Tensor& input,
                                const collectives::Allocate& allocate);
  collectives::AlltoallResult alltoall(const collectives::Tensor& input,
                                       const std::vector<int64_t>& splits,
                                       const collectives::Allocate& allocate);
  collectives::Tensor reducescatter(const collectives::Tensor& input, collectives::ReduceOp op,
                                    const collectives::Allocate& allocate);
  void barrier();

 private:
  Runtime(Config config, std::unique_ptr<rendezvous::Store> ownedStore);
  void connect(rendezvous::Store& store, const std::string& bindAddress);

  Config config_;
  std::unique_ptr<rendezvous::Store> ownedStore_;
  std::unique_ptr<collectives::Comm> comm_;
};

}  // namespace hvd::runtime
