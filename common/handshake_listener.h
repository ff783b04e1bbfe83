// A listening socket that authenticates what it accepts (the HMAC handshake of common/auth.h)
// without letting a stranger hold anything up. Every accepted connection runs its handshake
// concurrently, under its own deadline; at most `maxPending` are unauthenticated at once (a new
// one evicts the oldest: honest peers answer within milliseconds); when the process is out of
// descriptors (EMFILE, ENFILE), or down to the last ones it keeps for itself (64, or a quarter
// of ulimit -n if less: hvdrun must still open its workers' pipes while strangers flood its
// rendezvous), accepting pauses with one log line instead of spinning on the ready listener.
// A failed handshake is logged with the peer's address (the first few at warning level, the
// rest at debug) and dropped; it is never blamed on the job's secret unless the peer's proof
// was wrong. The owner gets authenticated sockets and the bytes the peer claimed, which are
// bound into its proof (a peer cannot claim another rank than the one it proved).
//
// Handshake on the wire: acceptor -> "HVD1" + nonce_a; connector -> nonce_c + proof + claim;
// acceptor -> answer; proofs over `context` followed by the claim (io::authenticateAsConnector
// is the other side).
//
// Thread model: everything runs on the acceptor's io_context, on the thread that runs it; call
// start() and stop() on that thread, or while no thread runs it.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::io {

// HVD_HANDSHAKE_TIMEOUT_SECONDS's default (common/params.cc reads it from here).
constexpr std::chrono::seconds kDefaultHandshakeTimeout{5};

struct ListenerOptions {
  std::string name;               // for log lines: "rank 0/3", "rendezvous"
  std::string subsystem = "net";  // the logger (common/logging.h)
  std::string secret;
  std::string context;         // bound into both proofs, followed by the claim
  std::size_t claimBytes = 0;  // the connector sends this many bytes after its proof
  std::chrono::milliseconds handshakeTimeout = kDefaultHandshakeTimeout;
  std::size_t maxPending = 64;                // unauthenticated connections at once
  std::shared_ptr<log::Logs> logs = nullptr;  // the owner's (a Runtime's); null: the process's
};

class HandshakeListener {
 public:
  using Accepted =
      std::function<void(boost::asio::ip::tcp::socket socket, std::vector<uint8_t> claim)>;

  HandshakeListener(boost::asio::ip::tcp::acceptor& acceptor, ListenerOptions options,
                    Accepted onAccepted);
  ~HandshakeListener();  // stop()
  HandshakeListener(const HandshakeListener&) = delete;
  HandshakeListener& operator=(const HandshakeListener&) = delete;

  void start();
  // Stops accepting, closes the acceptor and every unfinished handshake (their handlers then do
  // nothing). onAccepted is not called after this returns.
  void stop();
  // Connections dropped so far (failed, timed out or evicted handshakes); any thread.
  int rejected() const;

  struct State;  // opaque: shared with the handlers of its asynchronous operations

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hvd::io
