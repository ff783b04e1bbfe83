#include "common/asio_io.h"

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <memory>
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

asio::ip::address resolveAddress(const asio::any_io_executor& executor, const std::string& host,
                                 uint16_t port, const std::string& what) {
  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return address;
  tcp::resolver resolver(executor);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty())
    throw IoError(what + ": cannot resolve host '" + host + "': " + ec.message());
  return results.begin()->endpoint().address();
}

void connect(tcp::socket& socket, const std::string& host, uint16_t port, Deadline deadline,
             const std::string& what) {
  error_code ec;
  tcp::endpoint endpoint(resolveAddress(socket.get_executor(), host, port, what), port);
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    if (socket.is_open()) socket.close(ec);
    socket.open(endpoint.protocol());
    setCloseOnExec(socket.native_handle());
    bool done = false;
    error_code result;
    socket.async_connect(endpoint, [&](const error_code& e) {
      result = e;
      done = true;
    });
    runUntil(socket, done, deadline, what + ": connect to " + host + ":" + std::to_string(port));
    if (!result) break;
    if (!retriableConnectError(result) || Clock::now() + backoff >= deadline)
      throw IoError(what + ": connect to " + host + ":" + std::to_string(port) + ": " +
                    result.message());
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
  if (result) throw IoError(readFailure(socket, result, got, buffer.size(), what));
}

std::string readFailure(const tcp::socket& socket, const error_code& ec, std::size_t got,
                        std::size_t wanted, const std::string& what) {
  if (ec == asio::error::eof)
    return detail::concat(what, ": connection closed by ", peerName(socket), " after ", got, "/",
                          wanted, " bytes");
  return what + ": read: " + ec.message();
}

bool retriableConnectError(const error_code& ec) {
  return ec == asio::error::connection_refused || ec == asio::error::connection_reset ||
         ec == asio::error::try_again;
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

namespace {

// The connector's side of one handshake, step by step on the socket's io_context.
struct ConnectorHandshake : std::enable_shared_from_this<ConnectorHandshake> {
  ConnectorHandshake(tcp::socket& s, const std::string& secretIn, std::string boundIn,
                     std::vector<uint8_t> claimIn, std::string whatIn,
                     std::function<void(std::exception_ptr)> doneIn)
      : socket(s),
        secret(secretIn),
        bound(std::move(boundIn)),
        claim(std::move(claimIn)),
        what(std::move(whatIn)),
        done(std::move(doneIn)) {}

  tcp::socket& socket;
  std::string secret;
  std::string bound;  // context + claim
  std::vector<uint8_t> claim;
  std::string what;
  std::function<void(std::exception_ptr)> done;
  std::array<uint8_t, auth::kMagic.size() + auth::kNonceBytes> hello{};
  auth::Nonce ownNonce{};
  auth::Digest proof{};
  auth::Digest expected{};  // the acceptor's answer, if it knows the secret
  auth::Digest answer{};

  void fail(const std::string& message) { done(std::make_exception_ptr(IoError(message))); }

  void start() {
    asio::async_read(
        socket, asio::buffer(hello),
        [self = shared_from_this()](const error_code& e, std::size_t n) { self->onHello(e, n); });
  }

  void onHello(const error_code& e, std::size_t n) {
    if (e) return fail(readFailure(socket, e, n, hello.size(), what + ": handshake"));
    if (!std::equal(auth::kMagic.begin(), auth::kMagic.end(), hello.begin()))
      return fail(what + ": " + peerName(socket) + " does not speak the hvd protocol");
    auth::Nonce acceptorNonce{};
    std::copy(hello.begin() + auth::kMagic.size(), hello.end(), acceptorNonce.begin());
    ownNonce = auth::randomNonce();
    proof = auth::connectorProof(secret, acceptorNonce, ownNonce, bound);
    expected = auth::acceptorProof(secret, acceptorNonce, ownNonce, bound);
    std::vector<asio::const_buffer> out{asio::buffer(ownNonce), asio::buffer(proof),
                                        asio::buffer(claim)};
    asio::async_write(socket, out, [self = shared_from_this()](const error_code& e, std::size_t) {
      if (e) return self->fail(self->what + ": handshake: write: " + e.message());
      self->readAnswer();
    });
  }

  void readAnswer() {
    asio::async_read(
        socket, asio::buffer(answer),
        [self = shared_from_this()](const error_code& e, std::size_t n) { self->onAnswer(e, n); });
  }

  void onAnswer(const error_code& e, std::size_t n) {
    // The acceptor also drops handshakes that take longer than its deadline, so a closed
    // connection is not necessarily about the secret; its log says which.
    if (e)
      return fail(what + ": authentication failed: " + peerName(socket) +
                  " closed the connection after our proof (it refuses a proof made with another "
                  "secret, HVD_SECRET, and drops a handshake slower than its "
                  "HVD_HANDSHAKE_TIMEOUT_SECONDS): " +
                  readFailure(socket, e, n, answer.size(), what + ": handshake"));
    if (!auth::digestsEqual(answer, expected))
      return fail(what + ": authentication failed: " + peerName(socket) +
                  " does not know the job secret");
    done(nullptr);
  }
};

}  // namespace

void asyncAuthenticateAsConnector(tcp::socket& socket, const std::string& secret,
                                  const std::string& context, const std::vector<uint8_t>& claim,
                                  const std::string& what,
                                  std::function<void(std::exception_ptr)> done) {
  std::string bound = context;
  bound.append(claim.begin(), claim.end());
  std::make_shared<ConnectorHandshake>(socket, secret, std::move(bound), claim, what,
                                       std::move(done))
      ->start();
}

void authenticateAsConnector(tcp::socket& socket, const std::string& secret,
                             const std::string& context, const std::vector<uint8_t>& claim,
                             Deadline deadline, const std::string& what) {
  bool done = false;
  std::exception_ptr error;
  asyncAuthenticateAsConnector(socket, secret, context, claim, what, [&](std::exception_ptr e) {
    error = std::move(e);
    done = true;
  });
  runUntil(socket, done, deadline, what + ": handshake");
  if (error) std::rethrow_exception(error);
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
