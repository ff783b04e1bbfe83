// Joining the job: the rendezvous and the communicators every rank needs. The data
// communicator carries collectives; the control communicator carries the engine's negotiation
// on links of its own.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "collectives/rendezvous/store.h"
#include "collectives/transport/comm.h"
#include "collectives/transport/wait_policy.h"
#include "common/logging.h"
#include "runtime/config.h"

namespace hvd::rendezvous {
class RendezvousServer;  // rendezvous_server.h and tcp_store_client.h (Boost.Asio) stay out
class TcpStoreClient;
}  // namespace hvd::rendezvous

namespace hvd::runtime {

// What one rank's joining of the job made. It owns all of it: nothing of a World is
// process-wide, so several Worlds (Runtimes) in one process are independent.
struct World {
  World();
  ~World();  // closes the rendezvous server, if this rank serves one
  World(World&&) noexcept;
  World& operator=(World&&) noexcept;

  // This rank's loggers: every line starts "host:pid [rank r/size]". Everything the World
  // made logs through them, and so does the Runtime that owns the World.
  std::shared_ptr<log::Logs> logs;
  // Rank 0 of a job that srun or mpirun started (Config::servesRendezvous()) serves the job's
  // rendezvous itself, for as long as this World lives or until leaveRendezvous.
  std::unique_ptr<rendezvous::RendezvousServer> rendezvousServer;
  std::unique_ptr<rendezvous::Store> ownedStore;  // the launcher's store client, if used
  // The ranks of such a job other than 0: ownedStore is a connection to rank 0's server.
  bool storeServedByRankZero = false;
  std::unique_ptr<rendezvous::Store> wrappedStore;  // StoreWrapper's, over the one in use
  std::unique_ptr<collectives::Comm> data;
  std::unique_ptr<collectives::Comm> control;  // null unless asked for
  // Every rank's host name, by rank, for messages that name a peer.
  std::vector<std::string> hostOfRank;
  int cpuShare = 1;  // compute threads that fit this rank's CPUs (cpu_binding.h's cpuShare)
  // WorldUse::Engine: the count of callers blocked on an operation's result, which the data
  // links read (collectives/transport/request.h, BlockedCallers) and the engine's handles keep.
  std::shared_ptr<std::atomic<int>> blockedCallers;
  // HVD_NETWORK_MODEL with the job's ranks per host, as every rank agreed at init: what
  // HVD_ALLREDUCE_ALGORITHM=auto reasons with across hosts.
  std::shared_ptr<const collectives::NetworkModel> networkModel;
};

enum class WorldUse {
  // The engine's: a control communicator too; the data links poll for config.engine.spinTime
  // before sleeping on a small message, and on a large one only while a caller is blocked on
  // a result (World::blockedCallers).
  Engine,
  // Collectives called directly: data links only, which poll for config.directSpinTime
  // before sleeping on any message (the caller is blocked in the collective anyway).
  Direct,
};

// Sets up this rank's logging (World::logs: `logs`, configured from the Config, or new ones),
// joins the rendezvous (the launcher's server from the Config, rank 0's own under srun or
// mpirun, or `store` for in-process tests) and connects every peer. Throws InvalidArgument for
// a bad configuration, TimeoutError naming the missing ranks, IoError for an unreachable server.
// `client`, when given, is the connection to the launcher's server to use (an elastic worker
// opened it to read its round); it becomes the World's ownedStore. `wrap`, when given, wraps
// the store the communicators rendezvous through (an elastic round's RoundStore).
using StoreWrapper = std::function<std::unique_ptr<rendezvous::Store>(rendezvous::Store&)>;
World connectWorld(const Config& config, rendezvous::Store* store, WorldUse use,
                   const StoreWrapper& wrap = {},
                   std::unique_ptr<rendezvous::TcpStoreClient> client = nullptr,
                   std::shared_ptr<log::Logs> logs = nullptr);

// The settings of a rank's loggers: the Config's level, subsystems and time format, and the
// prefix "host:pid [rank r/size]".
log::LogSettings logSettings(const Config& config);

// After the collective shutdown, in a job whose rank 0 serves the rendezvous (srun, mpirun):
// rank 0 closes its server, and every other rank waits (up to `timeout`) until its connection
// to that server has closed. So no rank's next init reaches the old server: rank 0's next init
// serves a new one, on the same port, which every rank finds whenever it gets there. Does
// nothing in other jobs. Never throws; a wait that runs out is logged.
void leaveRendezvous(World& world, std::chrono::milliseconds timeout);

}  // namespace hvd::runtime
