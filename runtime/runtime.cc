#include "runtime/runtime.h"

#include <optional>

#include "collectives/rendezvous/elastic_rounds.h"
#include "collectives/rendezvous/failure_reports.h"
#include "collectives/rendezvous/tcp_store_client.h"
#include "common/logging.h"
#include "runtime/engine/failure_notice.h"

namespace hvd::runtime {

using namespace hvd::collectives;

Runtime::Runtime(Config config, World world, rendezvous::Store* store)
    : config_(std::move(config)), world_(std::move(world)) {
  reportStore_ = store ? store : world_.ownedStore.get();
  EngineOptions options = config_.engine;
  options.blockedCallers = world_.blockedCallers;
  options.logs = world_.logs;
  options.executor.logs = world_.logs;
  options.executor.networkModel = world_.networkModel;
  options.hostOfRank = world_.hostOfRank;
  options.coordinator.hostOfRank = world_.hostOfRank;
  options.onFailure = [this](const std::string& why, bool causedByPeer) {
    reportFailure(why, causedByPeer);
  };
  try {
    engine_ = std::make_unique<Engine>(std::move(options), std::move(world_.data),
                                       std::move(world_.control));
  } catch (const std::exception& e) {
    // An engine that cannot start (the timeline's file, a thread) is this rank's own failure,
    // whatever its peers report once its links close.
    reportFailure(e.what(), causedByPeer(std::current_exception()));
    throw;
  }
}

void Runtime::reportFailure(const std::string& why, bool causedByPeer) {
  if (!reportStore_) return;
  try {
    rendezvous::postFailureReport(*reportStore_, config_.jobId,
                                  {config_.topology.rank, causedByPeer, why});
  } catch (const std::exception& e) {
    world_.logs->get("runtime")->debug("rank {}: could not tell the launcher why it fails: {}",
                                       config_.topology.rank, e.what());
  }
}

Runtime::~Runtime() { engine_.reset(); }

namespace {

// An elastic worker's placement comes from hvdrun's newest round, and every round is a job of
// its own for the rendezvous keys and shared-memory names, so nothing of an earlier round's
// communicators is read back.
struct ElasticJoin {
  Config config;
  int64_t round = -1;
  std::unique_ptr<rendezvous::TcpStoreClient> client;  // handed on to the World
};

ElasticJoin joinElasticRound(const Config& given, rendezvous::Store* store) {
  ElasticJoin join{given, -1, nullptr};
  if (!store) {
    join.client = std::make_unique<rendezvous::TcpStoreClient>(
        given.rendezvousAddr, given.rendezvousPort, given.secret, given.startTimeout);
    store = join.client.get();
  }
  auto joined =
      rendezvous::elastic::joinNextRound(*store, given.jobId, given.workerId, given.elasticTimeout);
  join.config.setTopology(joined.placement);
  join.config.jobId = detail::concat(given.jobId, "r", joined.round);
  join.config.peerAddress = joined.address;
  // A round's workers wait for each other as long as hvdrun waits for them: a new worker may
  // be ready long before the running ones reach their next commit. A round given up meanwhile
  // ends the wait early (RoundStore).
  join.config.startTimeout = std::max(given.startTimeout, given.elasticTimeout);
  join.round = joined.round;
  return join;
}

}  // namespace

std::unique_ptr<Runtime> Runtime::create(const Config& given, rendezvous::Store* store,
                                         log::SinkPtr logSink) {
  auto logs = std::make_shared<log::Logs>(logSettings(given), std::move(logSink));
  ElasticJoin join;
  std::optional<World> world;
  // A round that hvdrun gives up while its workers connect (a member's host failed before it
  // formed) is followed by a newer one, which this worker joins instead.
  while (!world) {
    if (given.elastic) join = joinElasticRound(given, store);
    const Config& config = given.elastic ? join.config : given;
    StoreWrapper roundStore;
    if (given.elastic)
      roundStore = [&](rendezvous::Store& inner) -> std::unique_ptr<rendezvous::Store> {
        return std::make_unique<rendezvous::elastic::RoundStore>(inner, given.jobId, join.round);
      };
    try {
      world =
          connectWorld(config, store, WorldUse::Engine, roundStore, std::move(join.client), logs);
    } catch (const rendezvous::elastic::RoundAbandoned& e) {
      logs->get("runtime")->warn("{}; worker {} joins the newer round", e.what(), given.workerId);
    }
  }
  const Config& config = given.elastic ? join.config : given;
  std::unique_ptr<Runtime> rt(new Runtime(config, std::move(*world), store));
  if (given.elastic) {
    rt->elasticRound_ = join.round;
    rt->elasticJobId_ = given.jobId;
    rt->elasticStore_ = store ? store : rt->world_.ownedStore.get();
    logs->get("runtime")->info("elastic worker {}: round {}, rank {} of {} on {}", config.workerId,
                               join.round, config.topology.rank, config.topology.size,
                               config.topology.hostname);
  }
  for (std::size_t i = 0; i < config.processSets.size(); ++i) {
    Operation add;
    add.type = OpType::AddProcessSet;
    add.name = "process_set.static." + std::to_string(i);
    add.setRanks = config.processSets[i];
    rt->run(std::move(add));
  }
  return rt;
}

void Runtime::shutdown() {
  if (engine_->shutdown()) leaveRendezvous(world_, config_.opTimeout);
  if (auto error = engine_->leftJoinedRanksError()) std::rethrow_exception(error);
}

int64_t Runtime::newestElasticRound() {
  if (!elasticStore_) return -1;
  return rendezvous::elastic::currentRound(*elasticStore_, elasticJobId_);
}

OpResult Runtime::run(Operation op) {
  Handle h = engine_->enqueue(std::move(op));
  return std::move(h->wait(config_.handleWaitLimit()));
}

void Runtime::allreduce(const Tensor& input, const Tensor& output, ReduceOp op, double prescale,
                        double postscale) {
  Operation o;
  o.type = OpType::Allreduce;
  o.inputs = {input};
  if (output.data != input.data) o.outputs = {output};
  o.reduceOp = op;
  o.prescale = prescale;
  o.postscale = postscale;
  run(std::move(o));
}

void Runtime::broadcast(const Tensor& tensor, int root) {
  Operation o;
  o.type = OpType::Broadcast;
  o.inputs = {tensor};
  o.root = root;
  run(std::move(o));
}

Tensor Runtime::allgather(const Tensor& input, const Allocate& allocate) {
  Operation o;
  o.type = OpType::Allgather;
  o.inputs = {input};
  o.allocate = allocate;
  return run(std::move(o)).outputs.at(0);
}

AlltoallResult Runtime::alltoall(const Tensor& input, const std::vector<int64_t>& splits,
                                 const Allocate& allocate) {
  Operation o;
  o.type = OpType::Alltoall;
  o.inputs = {input};
  o.splits = splits;
  o.allocate = allocate;
  OpResult r = run(std::move(o));
  return {r.outputs.at(0), r.receivedSplits.at(0)};
}

Tensor Runtime::reducescatter(const Tensor& input, ReduceOp op, const Allocate& allocate) {
  Operation o;
  o.type = OpType::Reducescatter;
  o.inputs = {input};
  o.reduceOp = op;
  o.allocate = allocate;
  return run(std::move(o)).outputs.at(0);
}

void Runtime::barrier() {
  Operation o;
  o.type = OpType::Barrier;
  run(std::move(o));
}

}  // namespace hvd::runtime
