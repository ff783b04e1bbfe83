// Connects to many authenticating listeners at once (io::HandshakeListener's other side): every
// dial connects, retries a refused connection with a growing pause (1 ms up to 100 ms: the peer
// may not be listening yet), and runs the connector's handshake (io::authenticateAsConnector),
// all on one io_context, so a rank that links to 63 peers waits about one round trip, not 63 in
// turn. Each dial ends once: with an authenticated socket, or with its error (IoError naming
// `what` and the step; TimeoutError when its deadline passed first).
//
// Thread model: everything runs on the io_context, on the thread that runs it; call dial() and
// stop() on that thread, or while no thread runs it.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hvd::io {

struct DialerOptions {
  std::string secret;
  std::string context;          // bound into both proofs, followed by each dial's claim
  std::size_t bufferBytes = 0;  // SO_SNDBUF/SO_RCVBUF set before connecting (0: the kernel's)
};

class HandshakeDialer {
 public:
  // A dial ended: `socket` is authenticated (TCP_NODELAY set) when `error` is null.
  using Done = std::function<void(std::size_t dial, boost::asio::ip::tcp::socket socket,
                                  std::exception_ptr error)>;

  HandshakeDialer(boost::asio::io_context& io, DialerOptions options, Done onDone);
  ~HandshakeDialer();  // stop()
  HandshakeDialer(const HandshakeDialer&) = delete;
  HandshakeDialer& operator=(const HandshakeDialer&) = delete;

  // Starts connecting to host:port (a host name is resolved now, on the calling thread) and
  // authenticating with `claim`; `what` names it in errors ("rank 3/8: connect to rank 1
  // (10.0.0.2:4100)"). Returns the dial's number: 0, 1, ... in the order of the calls.
  std::size_t dial(const std::string& host, uint16_t port, std::vector<uint8_t> claim,
                   std::chrono::steady_clock::time_point deadline, std::string what);
  // Closes every unfinished dial; onDone is not called after this returns.
  void stop();
  // Dials not yet ended.
  std::size_t unfinished() const;

  struct State;  // opaque: shared with the handlers of its asynchronous operations

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hvd::io
