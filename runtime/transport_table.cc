#include "runtime/transport_table.h"

#include <algorithm>

#include "collectives/transport/shm/shm_device.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "common/format.h"

namespace hvd::runtime {
namespace {

namespace shm = collectives::shm;
namespace tcp = collectives::tcp;

std::string shmWhyNot(const Config& config, const LinkSet& set) {
  if (config.transport == Transport::Tcp) return "HVD_TRANSPORT=tcp";
  if (set.memory != MemoryKind::Host) return "shared memory links host memory only";
  if (set.size < 2) return "a single rank has no peers to link";
  const Topology& t = config.topology;
  if (!set.sameHost)
    return detail::concat("the job's ", set.size, " ranks are not all on one host (", t.localSize,
                          " on ", t.hostname, "): shared memory links only ranks of one host");
  return "";
}

// A segment per rank, whose rings the ranks of one host map (shm_device.h). A rank that cannot
// makes every rank throw ShmUnavailable, the table's cue to try TCP.
Linked shmConnect(const Config& config, const LinkSet& set, const LinkSetup& setup) {
  std::size_t ringBytes = setup.traffic == Traffic::Control
                              ? shm::controlRingBytes(config.shmBufferBytes)
                              : config.shmBufferBytes;
  auto device = shm::ShmDevice::create(
      {ringBytes, setup.waits.spins, shm::jobSegmentPrefix(config.jobId), setup.logs});
  auto comm =
      device->connectAll(set.rank, set.size, *setup.store, config.startTimeout, config.opTimeout);
  return {std::move(comm), Transport::Shm,
          detail::concat("shared memory with ", set.size - 1, " local peers, rings of ",
                         ringBytes >> 10, " KiB")};
}

std::string tcpWhyNot(const Config& config, const LinkSet& set) {
  if (config.transport == Transport::Shm) return "HVD_TRANSPORT=shm";
  if (set.memory != MemoryKind::Host) return "TCP links host memory only";
  return "";
}

Linked tcpConnect(const Config& config, const LinkSet& set, const LinkSetup& setup) {
  if (setup.existing)
    return {setup.existing->subset(setup.ranks), Transport::Tcp, "the job's TCP links"};
  auto device = tcp::TcpDevice::create(setup.bindAddress, config.secret, config.socketBufferBytes,
                                       setup.waits, config.handshakeTimeout, setup.logs);
  auto comm = device->connectAll(set.rank, set.size, *setup.store, config.startTimeout,
                                 config.opTimeout, setup.shape);
  return {std::move(comm), Transport::Tcp, detail::concat("tcp on ", device->listenAddress())};
}

}  // namespace

const std::vector<TransportEntry>& transportTable() {
  // Constant data, built once; nothing in it belongs to a Runtime.
  static const std::vector<TransportEntry> kTable = {
      {Transport::Shm, "shared memory", shmWhyNot, shmConnect},
      {Transport::Tcp, "TCP", tcpWhyNot, tcpConnect},
  };
  return kTable;
}

bool TransportChooser::mayTry(const TransportEntry& entry, const Config& config,
                              const LinkSet& set) const {
  return std::find(unavailable_.begin(), unavailable_.end(), entry.kind) == unavailable_.end() &&
         entry.whyNot(config, set).empty();
}

Linked TransportChooser::connect(const Config& config, const LinkSet& set, const LinkSetup& setup,
                                 const FallbackNote& note) {
  const auto& table = *table_;
  auto next = [&](auto from) {
    return std::find_if(from, table.end(),
                        [&](const TransportEntry& e) { return mayTry(e, config, set); });
  };
  auto entry = next(table.begin());
  if (entry == table.end()) {
    for (const TransportEntry& e : table)
      if (e.kind == config.transport)
        throw InvalidArgument(detail::concat("HVD_TRANSPORT=", transportName(config.transport),
                                             ", but ", e.whyNot(config, set)));
    throw InternalError(detail::concat("no transport can link ", set.size, " ranks (HVD_TRANSPORT=",
                                       transportName(config.transport), ")"));
  }
  for (;;) {
    try {
      return entry->connect(config, set, setup);
    } catch (const collectives::TransportUnavailable& e) {
      if (config.transport == entry->kind) throw;
      unavailable_.push_back(entry->kind);
      auto following = next(entry + 1);
      if (following == table.end()) throw;
      note(e.what(), *following);
      entry = following;
    }
  }
}

}  // namespace hvd::runtime
