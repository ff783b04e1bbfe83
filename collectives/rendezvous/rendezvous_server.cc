#include "collectives/rendezvous/rendezvous_server.h"

#include <atomic>
#include <list>

#include "collectives/rendezvous/key_value_table.h"
#include "collectives/rendezvous/protocol.h"
#include "common/auth.h"
#include "common/error.h"
#include "common/frame.h"
#include "common/logging.h"

namespace hvd::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
namespace proto = rendezvous::protocol;

struct Session;

// Shared state; touched only on the io_context thread.
struct RendezvousServer::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::string secret;
  rendezvous::KeyValueTable table;
  struct Waiter {
    std::vector<std::string> keys;
    std::shared_ptr<Session> session;
    std::shared_ptr<asio::steady_timer> timer;
  };
  std::list<Waiter> waiters;
  std::atomic<int> rejected{0};

  void accept();
  void wakeWaiters();
};

// One client connection: handshake, then request/response frames in order.
struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket s, RendezvousServer::State& st) : socket(std::move(s)), state(st) {
    error_code ec;
    auto ep = socket.remote_endpoint(ec);
    peer = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void start() {
    nonce = auth::randomNonce();
    std::array<asio::const_buffer, 2> hello = {asio::buffer(auth::kMagic), asio::buffer(nonce)};
    auto self = shared_from_this();
    asio::async_write(socket, hello, [this, self](error_code ec, std::size_t) {
      if (ec) return drop("handshake write: " + ec.message());
      asio::async_read(socket, asio::buffer(proofIn), [this, self](error_code e, std::size_t) {
        if (e) return reject("no handshake (" + e.message() + ")");
        onProof();
      });
    });
  }

  void onProof() {
    auth::Nonce theirs;
    auth::Digest proof;
    std::memcpy(theirs.data(), proofIn.data(), theirs.size());
    std::memcpy(proof.data(), proofIn.data() + theirs.size(), proof.size());
    if (!auth::digestsEqual(proof, auth::connectorProof(state.secret, nonce, theirs,
                                                         proto::kAuthContext)))
      return reject("authentication failed (wrong or missing job secret)");
    answer = auth::acceptorProof(state.secret, nonce, theirs, proto::kAuthContext);
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(answer), [this, self](error_code ec, std::size_t) {
      if (ec) return drop("handshake write: " + ec.message());
      readRequest();
    });
  }

  void readRequest() {
    auto self = shared_from_this();
    asio::async_read(socket, asio::buffer(header), [this, self](error_code ec, std::size_t) {
      if (ec) return drop(ec == asio::error::eof ? "" : ec.message());
      std::size_t n;
      try {
        n = frame::decodeHeader(header, peer);
      } catch (const Error& e) {
        return reject(e.what());
      }
      body.resize(n);
      asio::async_read(socket, asio::buffer(body), [this, self](error_code e, std::size_t) {
        if (e) return drop(e.message());
        onRequest();
      });
    });
  }

  void onRequest() {
    proto::Request request;
    try {
      request = proto::decodeRequest(body, peer);
    } catch (const Error& e) {
      return reject(e.what());
    }
    proto::Response response;
    try {
      switch (request.op) {
        case proto::Op::Set:
          state.table.set(request.keys[0], std::move(request.value));
          state.wakeWaiters();
          break;
        case proto::Op::Get:
          if (auto v = state.table.get(request.keys[0])) {
            response.found = true;
            response.value = std::move(*v);
          }
          break;
        case proto::Op::Add:
          response.counter = state.table.add(request.keys[0], request.delta);
          state.wakeWaiters();
          break;
        case proto::Op::Wait:
          return startWait(request);
      }
    } catch (const InvalidArgument& e) {
      response.ok = false;
      response.error = e.what();
    }
    respond(response);
  }

  void startWait(const proto::Request& request) {
    if (state.table.missing(request.keys).empty()) return respond({});
    auto timer = std::make_shared<asio::steady_timer>(state.io);
    timer->expires_after(std::chrono::milliseconds(request.timeoutMs));
    auto it = state.waiters.insert(state.waiters.end(),
                                   {request.keys, shared_from_this(), timer});
    timer->async_wait([st = &state, it, timer](error_code ec) {
      if (ec) return;  // cancelled: the keys arrived
      proto::Response r;
      r.ok = false;
      r.missing = st->table.missing(it->keys);
      auto session = it->session;
      st->waiters.erase(it);
      session->respond(r);
    });
  }

  void respond(const proto::Response& response) {
    auto payload = std::make_shared<std::vector<uint8_t>>(proto::encode(response));
    auto head = std::make_shared<frame::Header>(frame::encodeHeader(payload->size()));
    std::array<asio::const_buffer, 2> buffers = {asio::buffer(*head), asio::buffer(*payload)};
    auto self = shared_from_this();
    asio::async_write(socket, buffers, [this, self, payload, head](error_code ec, std::size_t) {
      if (ec) return drop(ec.message());
      readRequest();
    });
  }

  void reject(const std::string& why) {
    state.rejected++;
    log::logger("rdzv")->warn("rendezvous: dropped connection from {}: {}", peer, why);
    error_code ignored;
    socket.close(ignored);
  }

  void drop(const std::string& why) {
    if (!why.empty()) log::logger("rdzv")->debug("rendezvous: {} closed: {}", peer, why);
    error_code ignored;
    socket.close(ignored);
  }

  tcp::socket socket;
  RendezvousServer::State& state;
  std::string peer;
  auth::Nonce nonce{};
  std::array<uint8_t, auth::kNonceBytes + auth::kDigestBytes> proofIn{};
  auth::Digest answer{};
  frame::Header header{};
  std::vector<uint8_t> body;
};

void RendezvousServer::State::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(std::move(socket), *this)->start();
    }
    accept();
  });
}

void RendezvousServer::State::wakeWaiters() {
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (table.missing(it->keys).empty()) {
      it->timer->cancel();
      auto session = it->session;
      it = waiters.erase(it);
      session->respond({});
    } else {
      ++it;
    }
  }
}

RendezvousServer::RendezvousServer(const std::string& bindAddress, std::string secret,
                                   uint16_t port)
    : state_(std::make_shared<State>()) {
  state_->secret = std::move(secret);
  error_code ec;
  tcp::endpoint endpoint(asio::ip::make_address(bindAddress, ec), port);
  if (ec) throw InvalidArgument("rendezvous: cannot bind '" + bindAddress + "': " + ec.message());
  state_->acceptor.open(endpoint.protocol());
  state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  state_->acceptor.bind(endpoint, ec);
  if (ec)
    throw IoError("rendezvous: cannot bind " + bindAddress + ":" + std::to_string(port) + ": " +
                  ec.message());
  state_->acceptor.listen();
  state_->accept();
  thread_ = std::thread([st = state_] {
    pthread_setname_np(pthread_self(), "hvd-rdzv");
    st->io.run();
  });
}

RendezvousServer::~RendezvousServer() {
  state_->io.stop();
  if (thread_.joinable()) thread_.join();
}

std::string RendezvousServer::address() const {
  return state_->acceptor.local_endpoint().address().to_string();
}

uint16_t RendezvousServer::port() const { return state_->acceptor.local_endpoint().port(); }

int RendezvousServer::rejectedConnections() const { return state_->rejected.load(); }

}  // namespace hvd::rendezvous
