#include "collectives/rendezvous/rendezvous_server.h"

#include <atomic>
#include <future>
#include <list>

#include "collectives/rendezvous/key_value_table.h"
#include "collectives/rendezvous/protocol.h"
#include "common/asio_io.h"
#include "common/error.h"
#include "common/frame.h"
#include "common/handshake_listener.h"
#include "common/logging.h"

namespace hvd::rendezvous {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;
namespace proto = rendezvous::protocol;

// Unauthenticated connections held at once; a new one evicts the oldest (an honest worker
// authenticates within milliseconds).
constexpr std::size_t kMaxPendingHandshakes = 128;
// A frame's body grows by at most this much per read.
constexpr std::size_t kBodyChunk = 64 << 10;

struct Session;

// Shared state; touched only on the io_context thread.
struct RendezvousServer::State {
  State(std::chrono::milliseconds handshake, std::shared_ptr<log::Logs> l)
      : handshakeTimeout(handshake), logs(std::move(l)) {}
  asio::io_context io;
  std::chrono::milliseconds handshakeTimeout;
  std::shared_ptr<log::Logs> logs;  // null: the process's
  std::string secret;
  // The first address's listener, then those listenAlso() added (after io: they stop first).
  std::list<tcp::acceptor> acceptors;
  std::list<io::HandshakeListener> listeners;
  rendezvous::KeyValueTable table;
  struct Waiter {
    std::vector<std::string> keys;
    std::shared_ptr<Session> session;
    std::shared_ptr<asio::steady_timer> timer;
  };
  std::list<Waiter> waiters;
  std::atomic<int> rejected{0};  // malformed frames; the listener counts failed handshakes

  void wakeWaiters();
  // Binds address:port and serves it; throws IoError naming both.
  void listen(const std::string& address, uint16_t port);
  int rejectedHandshakes() const {
    int n = 0;
    for (const auto& l : listeners) n += l.rejected();
    return n;
  }
};

// One authenticated client connection: request/response frames in order.
struct Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket s, RendezvousServer::State& st)
      : socket(std::move(s)), state(st), bodyTimer(st.io) {
    peer = io::peerName(socket);
  }

  void readRequest() {
    auto self = shared_from_this();
    asio::async_read(socket, asio::buffer(header), [this, self](error_code ec, std::size_t) {
      if (ec) return drop(ec == asio::error::eof ? "" : ec.message());
      try {
        announced = frame::decodeHeader(header, peer);
      } catch (const Error& e) {
        return reject(e.what());
      }
      body.clear();
      readBody();
    });
  }

  // The body is read as it arrives, never allocated from the announced size up front, and it
  // must keep coming: a peer silent mid-frame for the handshake timeout is dropped.
  void readBody() {
    if (body.size() == announced) {
      bodyTimer.cancel();
      return onRequest();
    }
    auto self = shared_from_this();
    bodyTimer.expires_after(state.handshakeTimeout);
    bodyTimer.async_wait([this, self](error_code ec) {
      if (ec) return;
      reject(detail::concat("sent ", body.size(), " of the ", announced,
                            " bytes its frame announced, then nothing for ",
                            state.handshakeTimeout.count(), " ms"));
    });
    std::size_t had = body.size();
    body.resize(had + std::min(kBodyChunk, announced - had));
    socket.async_read_some(asio::buffer(body.data() + had, body.size() - had),
                           [this, self, had](error_code ec, std::size_t n) {
                             if (ec) {
                               bodyTimer.cancel();
                               return drop(ec.message());
                             }
                             body.resize(had + n);
                             readBody();
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
        case proto::Op::MultiGet:
          response.values = state.table.multiGet(request.keys);
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
    auto it = state.waiters.insert(state.waiters.end(), {request.keys, shared_from_this(), timer});
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
    log::logger(state.logs.get(), "rdzv")
        ->warn("rendezvous: dropped connection from {}: {}", peer, why);
    error_code ignored;
    socket.close(ignored);
  }

  void drop(const std::string& why) {
    if (!why.empty())
      log::logger(state.logs.get(), "rdzv")->debug("rendezvous: {} closed: {}", peer, why);
    error_code ignored;
    socket.close(ignored);
  }

  tcp::socket socket;
  RendezvousServer::State& state;
  asio::steady_timer bodyTimer;
  std::string peer;
  frame::Header header{};
  std::size_t announced = 0;
  std::vector<uint8_t> body;
};

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

void RendezvousServer::State::listen(const std::string& address, uint16_t port) {
  error_code ec;
  tcp::endpoint endpoint(asio::ip::make_address(address, ec), port);
  if (ec) throw InvalidArgument("rendezvous: cannot bind '" + address + "': " + ec.message());
  tcp::acceptor& acceptor = acceptors.emplace_back(io);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) {
    acceptors.pop_back();
    throw IoError("rendezvous: cannot bind " + address + ":" + std::to_string(port) + ": " +
                  ec.message());
  }
  acceptor.listen(asio::socket_base::max_listen_connections);
  io::HandshakeListener& listener =
      listeners.emplace_back(acceptor,
                             io::ListenerOptions{"rendezvous", "rdzv", secret, proto::kAuthContext,
                                                 0, handshakeTimeout, kMaxPendingHandshakes, logs},
                             [this](tcp::socket socket, std::vector<uint8_t>) {
                               std::make_shared<Session>(std::move(socket), *this)->readRequest();
                             });
  listener.start();
}

RendezvousServer::RendezvousServer(const std::string& bindAddress, std::string secret,
                                   uint16_t port, std::chrono::milliseconds handshakeTimeout,
                                   std::shared_ptr<log::Logs> logs)
    : state_(std::make_shared<State>(handshakeTimeout, std::move(logs))) {
  state_->secret = std::move(secret);
  state_->listen(bindAddress, port);
  auto endpoint = state_->acceptors.front().local_endpoint();
  address_ = endpoint.address().to_string();
  port_ = endpoint.port();
  thread_ = std::thread([st = state_] {
    pthread_setname_np(pthread_self(), "hvd-rdzv");
    st->io.run();
  });
}

RendezvousServer::~RendezvousServer() {
  state_->io.stop();
  if (thread_.joinable()) thread_.join();
  for (auto& l : state_->listeners) l.stop();
}

void RendezvousServer::listenAlso(const std::string& address) {
  // The I/O thread reports a failure as text, not as an exception_ptr: an exception freed on
  // another thread than the one that read it is what ThreadSanitizer cannot follow.
  std::promise<std::string> done;
  auto result = done.get_future();
  asio::post(state_->io, [&] {
    std::string error;
    try {
      bool served = false;
      for (const auto& a : state_->acceptors)
        served |= a.local_endpoint().address().to_string() == address;
      if (!served) state_->listen(address, port());
    } catch (const std::exception& e) {
      error = e.what();
    }
    done.set_value(error);
  });
  if (std::string error = result.get(); !error.empty()) throw IoError(error);
}

std::string RendezvousServer::address() const { return address_; }

uint16_t RendezvousServer::port() const { return port_; }

int RendezvousServer::rejectedConnections() const {
  std::promise<int> count;
  auto result = count.get_future();
  asio::post(state_->io, [&] { count.set_value(state_->rejectedHandshakes()); });
  return state_->rejected.load() + result.get();
}

}  // namespace hvd::rendezvous
