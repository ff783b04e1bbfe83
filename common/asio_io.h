// Blocking socket operations with deadlines, built on Asio's asynchronous operations and driven
// by the calling thread (io_context::run_one_until). Used for connection set-up (handshakes,
// rendezvous client) where a simple call-and-wait shape is clearest.
// Thread model: the caller must be the only thread running `socket`'s io_context.
// Throws TimeoutError when the deadline passes and IoError on a socket error; `what` names the
// operation and peer in both messages.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "common/auth.h"

namespace hvd::io {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// An IP address as it is, or a host name's first address (blocking); IoError naming `what`.
asio::ip::address resolveAddress(const asio::any_io_executor& executor, const std::string& host,
                                 uint16_t port, const std::string& what);
// Connects to host:port, retrying refused connections until the deadline (the peer may not be
// listening yet). Sets TCP_NODELAY. (Many connections at once: io::HandshakeDialer.)
void connect(tcp::socket& socket, const std::string& host, uint16_t port, Deadline deadline,
             const std::string& what);
// Sets SO_SNDBUF and SO_RCVBUF (the kernel caps them at net.core.[rw]mem_max).
void setBufferSizes(tcp::socket& socket, std::size_t bytes);
void setBufferSizes(tcp::acceptor& acceptor, std::size_t bytes);
void writeAll(tcp::socket& socket, const std::vector<asio::const_buffer>& buffers,
              Deadline deadline, const std::string& what);
void readExact(tcp::socket& socket, asio::mutable_buffer buffer, Deadline deadline,
               const std::string& what);
// What a failed read of `wanted` bytes, `got` of them read, says: "<what>: connection closed by
// <peer> after 3/36 bytes", or "<what>: read: <error>".
std::string readFailure(const tcp::socket& socket, const boost::system::error_code& ec,
                        std::size_t got, std::size_t wanted, const std::string& what);
// A connect that may succeed when tried again (the peer is not listening yet, or its backlog
// was full): refused, reset, EAGAIN.
bool retriableConnectError(const boost::system::error_code& ec);

// One length-prefixed frame (common/frame.h).
void writeFrame(tcp::socket& socket, const std::vector<uint8_t>& payload, Deadline deadline,
                const std::string& what);
std::vector<uint8_t> readFrame(tcp::socket& socket, Deadline deadline, const std::string& what);

// The connecting side of the HMAC handshake (common/auth.h; io::HandshakeListener is the other
// side). `context` and then `claim` (sent after the proof, e.g. the connector's rank) are bound
// into both proofs. Throws IoError ("authentication failed") when the acceptor's proof is wrong.
void authenticateAsConnector(tcp::socket& socket, const std::string& secret,
                             const std::string& context, const std::vector<uint8_t>& claim,
                             Deadline deadline, const std::string& what);
// The same without waiting, for many connections at once (io::HandshakeDialer): `done` runs on
// the socket's io_context with null, or the IoError above (also when the socket was closed or
// cancelled under it). The caller keeps `socket` open and alive until then, and bounds the wait.
void asyncAuthenticateAsConnector(tcp::socket& socket, const std::string& secret,
                                  const std::string& context, const std::vector<uint8_t>& claim,
                                  const std::string& what,
                                  std::function<void(std::exception_ptr)> done);

// Marks a descriptor close-on-exec. Asio opens and accepts sockets without it; a worker's
// socket inherited by a process it starts would keep the link open after the worker dies.
void setCloseOnExec(int fd);

// "ip:port" of the socket's peer, or "unknown peer".
std::string peerName(const tcp::socket& socket);

}  // namespace hvd::io
