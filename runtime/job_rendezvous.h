// How a rank joins its job's rendezvous: hvdrun's server (its address in the Config), or, for
// ranks that srun or mpirun started, rank 0's own, which rank 0 serves; under srun with no
// exported secret, the secret rank 0 hands out in munge credentials (munge_secret.h) first.
#pragma once

#include <memory>
#include <string>

#include "runtime/munge_secret.h"
#include "runtime/world.h"

namespace hvd::runtime {

struct RendezvousJoin {
  // Rank 0's munge secret server, kept until every rank has joined (none can before it has
  // the secret).
  std::unique_ptr<MungeSecretServer> secretServer;
  rendezvous::Store* store = nullptr;  // what this rank's communicators rendezvous through
  std::string bindAddress;             // where this rank listens for its peers
};

// Sets config.secret (munge), world.rendezvousServer, world.ownedStore and
// world.storeServedByRankZero. `store`: an in-process store (tests' ranks as threads): used as
// is, nothing is served or opened. `client`: the connection to hvdrun's server, when the caller
// opened it already (an elastic worker reading its round); it becomes world.ownedStore.
RendezvousJoin joinRendezvous(Config& config, World& world, rendezvous::Store* store,
                              std::unique_ptr<rendezvous::TcpStoreClient> client);

}  // namespace hvd::runtime
