#include "common/asio_io.h"

#include <fcntl.h>

#include <thread>

#include "common/error.h"
#include "common/frame.h"

namespace hvd::io {
namespace {

using boost::system::error_code;

// Runs the socket's io_context until `done` or the deadline; on timeout cancels the operation,
// lets its handler run, and throws.
void runUntil(tcp::socket& socket, const bool& done, Deadline deadline, const std::string& what) {
  auto& ctx = static_cast<asio::io_context&>(socket.get_executor().context());
  while (!done) {
    if (ctx.stopped()) ctx.restart();
    if (Clock::now() >= deadline) {
      error_code ignored;
      socket.cancel(ignored);
      while (!done) {
        if (ctx.stopped()) ctx.restart();
        ctx.run_one();
      }
      throw TimeoutError(what + ": timed out");
    }
    ctx.run_one_until(deadline);
  }
}

void throwIfError(const error_code& ec, const std::string& what) {
  if (ec) throw IoError(what + ": " + ec.message());
}

}  // namespace

void setBufferSizes(tcp::socket& socket, std::size_t bytes) {
  error_code ignored;
  socket.set_option(asio::socket_base::send_buffer_size(static_cast<int>(bytes)), ignored);
  socket.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(bytes)), ignored);
}

void setBufferSizes(tcp::acceptor& acceptor, std::size_t bytes) {
  error_code ignored;
  acceptor.set_option(asio::socket_base::send_buffer_size(static_cast<int>(bytes)), ignored);
  acceptor.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(bytes)), ignored);
}

void connect(tcp::socket& socket, const std::string& host, uint16_t port, Deadline deadline,
             const std::string& what, std::size_t bufferBytes,
             const std::function<void()>& betweenTries) {
  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver resolver(socket.get_executor());
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty())
      throw IoError(what + ": cannot resolve host '" + host + "': " + ec.message());
    address = results.begin()->endpoint().address();
  }
  tcp::endpoint endpoint(address, port);
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    if (socket.is_open()) socket.close(ec);
    socket.open(endpoint.protocol());
    setCloseOnExec(socket.native_handle());
    if (bufferBytes > 0) setBufferSizes(socket, bufferBytes);
    bool done = false;
    error_code result;
    socket.async_connect(endpoint, [&](const error_code& e) {
      result = e;
      done = true;
    });
    runUntil(socket, done, deadline, what + ": connect to " + host + ":" + std::to_string(port));
    if (!result) break;
    bool retriable = result == asio::error::connection_refused ||
                     result == asio::error::connection_reset || result == asio::error::try_again;
    if (!retriable || Clock::now() + backoff >= deadline)
      throw IoError(what + ": connect to " + host + ":" + std::to_string(port) + ": " +
                    result.message());
    if (betweenTries) betweenTries();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  socket.set_option(tcp::no_delay(true));
}

void writeAll(tcp::socket& socket, const std::vector<asio::const_buffer>& buffers,
              Deadline deadline, const std::string& what) {
  bool done = false;
  error_code result;
  asio::async_write(socket, buffers, [&](const error_code& e, std::size_t) {
    result = e;
    done = true;
  });
  runUntil(socket, done, deadline, what + ": write");
  throwIfError(result, what + ": write");
}

void readExact(tcp::socket& socket, asio::mutable_buffer buffer, Deadline deadline,
               const std::string& what) {
  bool done = false;
  error_code result;
  std::size_t got = 0;
  asio::async_read(socket, buffer, [&](const error_code& e, std::size_t n) {
    result = e;
    got = n;
    done = true;
  });
  runUntil(socket, done, deadline, what + ": read");
  if (result == asio::error::eof)
    throw IoError(detail::concat(what, ": connection closed by ", peerName(socket), " after ", got,
                                 "/", buffer.size(), " bytes"));
  throwIfError(result, what + ": read");
}

void writeFrame(tcp::socket& socket, const std::vector<uint8_t>& payload, Deadline deadline,
                const std::string& what) {
  frame::Header header = frame::encodeHeader(payload.size());
  writeAll(socket, {asio::buffer(header), asio::buffer(payload)}, deadline, what);
}

std::vector<uint8_t> readFrame(tcp::socket& socket, Deadline deadline, const std::string& what) {
  frame::Header header{};
  readExact(socket, asio::buffer(header), deadline, what);
  std::vector<uint8_t> payload(frame::decodeHeader(header, peerName(socket)));
  if (!payload.empty()) readExact(socket, asio::buffer(payload), deadline, what);
  return payload;
}

void authenticateAsConnector(tcp::socket& socket, const std::string& secret,
                             const std::string& context, const std::vector<uint8_t>& claim,
                             Deadline deadline, const std::string& what) {
  std::array<uint8_t, auth::kMagic.size()> magic{};
  auth::Nonce acceptorNonce{};
  readExact(socket, asio::buffer(magic), deadline, what + ": handshake");
  if (magic != auth::kMagic)
    throw IoError(what + ": " + peerName(socket) + " does not speak the hvd protocol");
  readExact(socket, asio::buffer(acceptorNonce), deadline, what + ": handshake");
  std::string bound = context;
  bound.append(claim.begin(), claim.end());
  auth::Nonce ownNonce = auth::randomNonce();
  auth::Digest proof = auth::connectorProof(secret, acceptorNonce, ownNonce, bound);
  writeAll(socket, {asio::buffer(ownNonce), asio::buffer(proof), asio::buffer(claim)}, deadline,
           what + ": handshake");
  auth::Digest answer{};
  try {
    readExact(socket, asio::buffer(answer), deadline, what + ": handshake");
  } catch (const IoError& e) {
    // The acceptor also drops handshakes that take longer than its deadline, so this is not
    // necessarily about the secret; its log says which.
    throw IoError(what + ": authentication failed: " + peerName(socket) +
                  " closed the connection after our proof (it refuses a proof made with another "
                  "secret, HVD_SECRET, and drops a handshake slower than its "
                  "HVD_HANDSHAKE_TIMEOUT_SECONDS): " +
                  e.what());
  }
  if (!auth::digestsEqual(answer, auth::acceptorProof(secret, acceptorNonce, ownNonce, bound)))
    throw IoError(what + ": authentication failed: " + peerName(socket) +
                  " does not know the job secret");
}

void setCloseOnExec(int fd) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

std::string peerName(const tcp::socket& socket) {
  error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace hvd::io
