// The transports that can link a communicator's ranks, in order of preference, after NCCL's
// ncclTransports[]: shared memory for ranks of one host, then TCP. World set-up (world.cc) and
// the host hierarchy (host_hierarchy.cc) both connect through a TransportChooser, which asks
// each entry in turn; so the choice, the job's HVD_TRANSPORT and the fallback when shared memory
// turns out to be unavailable are written once. transport_table.cc is the one file of the
// runtime that names the concrete transports.
// Thread model: a chooser belongs to the thread that sets up its Runtime's communicators.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"
#include "collectives/transport/comm.h"
#include "collectives/transport/device.h"
#include "collectives/transport/wait_policy.h"
#include "runtime/config.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::runtime {

// The memory a communicator moves. Device memory is the GPU backend's (collectives/gpu), which
// runs whole collectives and is chosen per operation, not a transport of this table.
enum class MemoryKind { Host };

// The ranks a communicator is to link, as a transport judges them.
struct LinkSet {
  int rank = 0;  // this rank's index among them
  int size = 1;
  bool sameHost = false;  // every one of them runs on this rank's host
  MemoryKind memory = MemoryKind::Host;
};

// What the links carry: the engine's control links get smaller shared-memory rings.
enum class Traffic { Data, Control };

// What a transport needs to build the links, besides the Config.
struct LinkSetup {
  rendezvous::Store* store = nullptr;  // scoped to this communicator (PrefixStore)
  collectives::WaitPolicy waits;       // each transport takes the parts it implements
  Traffic traffic = Traffic::Data;
  // The pairs to link: the engine's control channel talks between rank 0 and each other rank
  // only, so its links form a star (collectives/transport/device.h).
  collectives::LinkShape shape = collectives::LinkShape::AllPairs;
  std::string bindAddress = "127.0.0.1";  // where TCP listens
  // A TCP communicator that links these ranks already (the host hierarchy's ranks of one host
  // are a subset of the job's), at the indices `ranks`: TCP then reuses its links instead of
  // connecting again. Null: TCP connects.
  const collectives::Comm* existing = nullptr;
  std::vector<int> ranks{};
  std::shared_ptr<log::Logs> logs;  // the Runtime's
};

// What a transport built.
struct Linked {
  std::unique_ptr<collectives::Comm> comm;
  Transport transport = Transport::Auto;  // the entry's: Tcp or Shm
  std::string description;                // for the log, e.g. "tcp on 10.0.0.5:41233"
};

struct TransportEntry {
  Transport kind;     // as HVD_TRANSPORT names it
  const char* label;  // in messages: "shared memory", "TCP"
  // Why it may not link `set` under the job's config (HVD_TRANSPORT, hosts, memory kind), or ""
  // when it may. Decided from facts every rank of `set` shares, so all of them agree.
  std::string (*whyNot)(const Config& config, const LinkSet& set);
  // Builds the links. Throws collectives::TransportUnavailable, on every rank of `set` alike,
  // when it cannot after all; TimeoutError naming missing ranks; IoError.
  Linked (*connect)(const Config& config, const LinkSet& set, const LinkSetup& setup);
};

// The table, in order of preference.
const std::vector<TransportEntry>& transportTable();

// Told when an entry was unavailable, before `next` is tried: `reason` is the entry's
// TransportUnavailable message (it names each rank that could not, and why).
using FallbackNote = std::function<void(const std::string& reason, const TransportEntry& next)>;

// Connects through the first entry of the table that may link the ranks and does. Remembers
// the entries that were unavailable, so the later communicators of the same set-up (the control
// links after the data links) do not try them again; the fallback is collective, so every
// rank's chooser remembers the same.
class TransportChooser {
 public:
  // `table`, which must outlive the chooser: the runtime's; tests pass their own.
  explicit TransportChooser(const std::vector<TransportEntry>& table = transportTable())
      : table_(&table) {}

  // Throws InvalidArgument when no entry may link `set` (HVD_TRANSPORT=shm for ranks on several
  // hosts), with the named transport's reason. Rethrows TransportUnavailable when the job named
  // that transport (HVD_TRANSPORT=shm means shared memory or fail) or no entry is left to try.
  Linked connect(const Config& config, const LinkSet& set, const LinkSetup& setup,
                 const FallbackNote& note);

 private:
  bool mayTry(const TransportEntry& entry, const Config& config, const LinkSet& set) const;
  const std::vector<TransportEntry>* table_;
  std::vector<Transport> unavailable_;
};

}  // namespace hvd::runtime
