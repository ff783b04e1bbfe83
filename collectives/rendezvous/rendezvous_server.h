// The job's rendezvous key-value store (served by hvdrun, or by rank 0 itself when an external
// launcher such as srun or mpirun started the ranks), served over TCP with Boost.Asio (protocol:
// collectives/rendezvous/protocol.h). Every connection must pass the HMAC handshake on the job
// secret before its first request, within the handshake timeout and with at most a fixed
// number pending (common/handshake_listener.h); one that fails is logged and dropped. A frame
// announcing more than the cap is refused from its header, and a body is read as it arrives.
// Thread model: one io_context thread owns all state (table, waiters, sessions); the public
// methods only start and stop it.
#pragma once

#include <boost/asio.hpp>

#include <chrono>

#include <memory>
#include <string>
#include <thread>

#include "common/handshake_listener.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::rendezvous {

class RendezvousServer {
 public:
  // Binds bindAddress on `port` (0: an ephemeral one) and starts serving on a background thread.
  // `logs`: the owner's (rank 0's Runtime); null: the process's (hvdrun).
  RendezvousServer(const std::string& bindAddress, std::string secret, uint16_t port = 0,
                   std::chrono::milliseconds handshakeTimeout = io::kDefaultHandshakeTimeout,
                   std::shared_ptr<log::Logs> logs = nullptr);
  // Stops serving: the port closes, and so does every client's connection.
  ~RendezvousServer();

  std::string address() const;  // the address given to the constructor
  uint16_t port() const;
  // Serves the same port on one more local address as well (a no-op for one it serves
  // already): a job whose hosts other machines join later listens on loopback first, then on
  // the address each remote host reaches this machine at, never on every interface. Throws
  // IoError when the address cannot be bound. Any thread.
  void listenAlso(const std::string& address);
  // Connections rejected so far (failed handshake or malformed frames); for tests and logs.
  int rejectedConnections() const;

  struct State;  // opaque: defined in the .cc, shared with its sessions

 private:
  std::shared_ptr<State> state_;
  std::string address_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace hvd::rendezvous
