// Everything one worker's hvd runtime owns: configuration, the communicators and the engine
// (engine/engine.h) that runs every operation, its loggers (their "host:pid [rank r/size]"
// prefix) and, on rank 0 of a job srun or mpirun started, the job's rendezvous server. No
// process-wide state: a test can build several Runtimes in one process, each with its own rank,
// rendezvous and log prefix, and destroying one closes its server's port. The only process-wide
// Runtime is the one the C API and the Python module share (current_runtime.h).
// Thread model: any thread may enqueue and wait; the blocking collectives are enqueue + wait.
#pragma once

#include <memory>

#include "runtime/blocking_collectives.h"
#include "runtime/engine/engine.h"
#include "runtime/world.h"

namespace hvd::runtime {

class Runtime : public BlockingCollectives {
 public:
  // Joins the job (world.h), starts the engine and creates the Config's static process sets.
  // `store` replaces the launcher's rendezvous server (in-process tests). `logSink`, when
  // given, receives this Runtime's log lines instead of stderr (an embedder's, or a test's); it
  // must be a sink of its own (common/logging.h).
  static std::unique_ptr<Runtime> create(const Config& config, rendezvous::Store* store = nullptr,
                                         log::SinkPtr logSink = nullptr);
  static std::unique_ptr<Runtime> create(const Config& config, rendezvous::Store& store) {
    return create(config, &store);
  }
  // Without shutdown(): leaves at once, without the other ranks. Closes the rendezvous server
  // this rank serves, if any.
  ~Runtime() override;

  const Topology& topology() const override { return config_.topology; }
  const Config& config() const { return config_; }
  Engine& engine() { return *engine_; }
  // This rank's loggers; any thread.
  log::Logs& logs() const { return *world_.logs; }
  // The thread count frameworks' frontends give their compute pools: this rank's CPU share, or
  // 0 (leave them alone) when the user chose with OMP_NUM_THREADS.
  int computeThreads() const { return config_.computeThreadsChosen ? 0 : cpuShare(); }
  // The compute threads this rank's CPUs can run without taking turns with another local
  // rank's (cpu_binding.h's cpuShare), whoever chose the thread count.
  int cpuShare() const { return world_.cpuShare; }

  // Collective: waits (up to HVD_OP_TIMEOUT) for every rank to call it, then closes every
  // thread and socket. In a job whose rank 0 serves the rendezvous, rank 0 then closes its
  // server and the other ranks wait for that (world.h, leaveRendezvous), so an init that
  // follows finds rank 0's next one. Throws InvalidArgument, once all that is done, when this
  // rank left while other ranks waited in join (they failed naming it).
  void shutdown();

  // An elastic worker's round (elastic_rounds.h) and the newest one hvdrun has published: a
  // newer one means the job's members changed. Both -1 outside an elastic job.
  int64_t elasticRound() const { return elasticRound_; }
  int64_t newestElasticRound();

  // Enqueues and waits; the result of allgather/alltoall/reducescatter must outlive nothing
  // (outputs come from `allocate`).
  OpResult run(Operation op);

  void allreduce(const collectives::Tensor& input, const collectives::Tensor& output,
                 collectives::ReduceOp op, double prescale = 1.0, double postscale = 1.0) override;
  void broadcast(const collectives::Tensor& tensor, int root) override;
  collectives::Tensor allgather(const collectives::Tensor& input,
                                const collectives::Allocate& allocate) override;
  collectives::AlltoallResult alltoall(const collectives::Tensor& input,
                                       const std::vector<int64_t>& splits,
                                       const collectives::Allocate& allocate) override;
  collectives::Tensor reducescatter(const collectives::Tensor& input, collectives::ReduceOp op,
                                    const collectives::Allocate& allocate) override;
  void barrier() override;

 private:
  // `store`: the one the tests gave create(), else null (world's launcher connection serves).
  Runtime(Config config, World world, rendezvous::Store* store);
  // Tells the launcher why this rank fails (failure_reports.h); best effort, never throws.
  void reportFailure(const std::string& why, bool causedByPeer);
  Config config_;
  World world_;  // the store client; the communicators move into the engine
  std::unique_ptr<Engine> engine_;
  int64_t elasticRound_ = -1;
  std::string elasticJobId_;
  rendezvous::Store* elasticStore_ = nullptr;  // world_'s launcher connection, or the tests' store
  rendezvous::Store* reportStore_ = nullptr;   // likewise, for failure notices
};

}  // namespace hvd::runtime
