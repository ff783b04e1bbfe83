#include "collectives/transport/tcp/tcp_device.h"

#include <set>

#include "collectives/transport/tcp/tcp_connection.h"
#include "common/asio_io.h"
#include "common/format.h"
#include "common/logging.h"

namespace hvd::collectives::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

const std::string kAuthContext = "hvd-tcp";

std::pair<std::string, uint16_t> splitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  HVD_ENFORCE(colon != std::string::npos, "malformed peer address '", address, "'");
  return {address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

}  // namespace

std::shared_ptr<TcpDevice> TcpDevice::create(const std::string& bindAddress, std::string secret,
                                             std::size_t socketBufferBytes,
                                             std::chrono::microseconds spin) {
  return std::shared_ptr<TcpDevice>(
      new TcpDevice(bindAddress, std::move(secret), socketBufferBytes, spin));
}

TcpDevice::TcpDevice(const std::string& bindAddress, std::string secret,
                     std::size_t socketBufferBytes, std::chrono::microseconds spin)
    : secret_(std::move(secret)), socketBufferBytes_(socketBufferBytes), spin_(spin) {
  error_code ec;
  auto address = asio::ip::make_address(bindAddress, ec);
  if (ec) throw InvalidArgument("tcp: cannot bind '" + bindAddress + "': not an IP address");
  tcp::endpoint endpoint(address, 0);
  acceptor_.open(endpoint.protocol());
  // Accepted sockets inherit these, in time for the handshake that fixes the window scale.
  if (socketBufferBytes_ > 0) io::setBufferSizes(acceptor_, socketBufferBytes_);
  acceptor_.bind(endpoint, ec);
  if (ec) throw IoError("tcp: cannot bind " + bindAddress + ": " + ec.message());
  acceptor_.listen(asio::socket_base::max_listen_connections);
}

std::string TcpDevice::listenAddress() const {
  auto ep = acceptor_.local_endpoint();
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

void TcpDevice::progressUntil(Deadline deadline, bool latencyBound) {
  if (io_.stopped()) io_.restart();
  if (latencyBound && spin_.count() > 0) {
    auto until = std::min(deadline, Clock::now() + spin_);
    do {
      if (io_.poll_one() > 0) return;
      std::this_thread::yield();
    } while (Clock::now() < until);
  }
  io_.run_one_until(deadline);
}

void TcpDevice::poll() {
  if (io_.stopped()) io_.restart();
  io_.poll();
}

// Posting a no-op makes run_one_until return once it has run it; a post made while no thread is
// inside run_one waits in the queue, so no wake-up is lost.
void TcpDevice::wake() { boost::asio::post(io_, [] {}); }

std::unique_ptr<Comm> TcpDevice::connectAll(int rank, int size, rendezvous::Store& store,
                                            std::chrono::milliseconds connectTimeout,
                                            std::chrono::milliseconds opTimeout) {
  HVD_ENFORCE(rank >= 0 && rank < size, "rank ", rank, " outside [0, ", size, ")");
  auto deadline = Clock::now() + connectTimeout;
  auto log = log::logger("tcp");
  std::string self = detail::concat("rank ", rank, "/", size);
  std::vector<std::shared_ptr<Connection>> connections(size);
  store.set("tcp/" + std::to_string(rank), [&] {
    std::string a = listenAddress();
    return rendezvous::Bytes(a.begin(), a.end());
  }());
  log->info("{}: listening on {}", self, listenAddress());

  std::vector<std::string> lowerKeys;
  for (int r = 0; r < rank; ++r) lowerKeys.push_back("tcp/" + std::to_string(r));
  try {
    if (!lowerKeys.empty()) store.wait(lowerKeys, connectTimeout);
  } catch (const rendezvous::StoreTimeout& e) {
    std::set<int> missing;
    for (const auto& k : e.missingKeys()) missing.insert(std::stoi(k.substr(4)));
    throw TimeoutError(detail::concat(self, ": timed out after ", connectTimeout.count() / 1000.0,
                                      " s waiting for ranks ", rankSet(missing),
                                      " to publish their addresses (did they start?)"));
  }
  // Lower ranks accept and higher ranks connect; rank k's connects depend only on ranks below
  // k reaching their accept loop, so this order cannot deadlock.
  for (int r = 0; r < rank; ++r) {
    auto value = store.get("tcp/" + std::to_string(r));
    connections[r] = connectTo(rank, size, r, std::string(value->begin(), value->end()), deadline);
  }
  std::vector<std::shared_ptr<Connection>> accepted;
  while (static_cast<int>(accepted.size()) < size - 1 - rank) {
    try {
      if (auto c = acceptOne(rank, size, accepted, deadline)) accepted.push_back(c);
    } catch (const TimeoutError&) {
      std::set<int> absent, silent;  // never joined the rendezvous / joined but did not connect
      for (int r = rank + 1; r < size; ++r) absent.insert(r);
      for (auto& c : accepted) absent.erase(c->peerRank());
      for (int r : std::set<int>(absent))
        if (store.get("tcp/" + std::to_string(r))) {
          absent.erase(r);
          silent.insert(r);
        }
      std::string why;
      if (!absent.empty()) why += " ranks " + rankSet(absent) + " never joined the rendezvous";
      if (!silent.empty())
        why += std::string(absent.empty() ? "" : ";") + " ranks " + rankSet(silent) +
               " joined but did not connect";
      throw TimeoutError(detail::concat(self, ": timed out after ",
                                        connectTimeout.count() / 1000.0,
                                        " s waiting for peers to connect:", why,
                                        " (did they start? HVD_START_TIMEOUT sets the limit)"));
    }
  }
  for (auto& c : accepted) connections[c->peerRank()] = c;
  log->debug("{}: connected to {} peers", self, size - 1);
  return std::make_unique<Comm>(rank, size, std::move(connections), opTimeout,
                                shared_from_this());
}

std::shared_ptr<Connection> TcpDevice::connectTo(int rank, int size, int peer,
                                                 const std::string& address, Deadline deadline) {
  auto [host, port] = splitAddress(address);
  std::string what = detail::concat("rank ", rank, "/", size, ": connect to rank ", peer, " (",
                                    address, ")");
  tcp::socket socket(io_);
  io::connect(socket, host, port, deadline, what, socketBufferBytes_);
  io::authenticateAsConnector(socket, secret_, kAuthContext, deadline, what);
  uint32_t ownRank = static_cast<uint32_t>(rank);
  io::writeAll(socket, {asio::buffer(&ownRank, sizeof ownRank)}, deadline, what);
  return std::make_shared<TcpConnection>(std::move(socket), *this, rank, size, peer);
}

std::shared_ptr<Connection> TcpDevice::acceptOne(
    int rank, int size, const std::vector<std::shared_ptr<Connection>>& accepted,
    Deadline deadline) {
  tcp::socket socket(io_);
  bool done = false;
  error_code result;
  acceptor_.async_accept(socket, [&](const error_code& e) {
    result = e;
    done = true;
  });
  while (!done) {
    if (Clock::now() >= deadline) {
      acceptor_.cancel();
      while (!done) progressUntil(Clock::now() + std::chrono::seconds(1), false);
      throw TimeoutError("accept timed out");
    }
    progressUntil(deadline, false);
  }
  if (result) throw IoError(detail::concat("rank ", rank, "/", size, ": accept: ", result.message()));
  socket.set_option(tcp::no_delay(true));
  std::string peerName = io::peerName(socket);
  std::string what = detail::concat("rank ", rank, "/", size, ": connection from ", peerName);
  try {
    // A silent or slow stranger must not hold up the job for long.
    auto handshakeDeadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    io::authenticateAsAcceptor(socket, secret_, kAuthContext, handshakeDeadline, what);
    uint32_t peer = 0;
    io::readExact(socket, asio::buffer(&peer, sizeof peer), handshakeDeadline, what);
    bool duplicate = false;
    for (auto& c : accepted) duplicate |= c->peerRank() == static_cast<int>(peer);
    if (static_cast<int>(peer) <= rank || static_cast<int>(peer) >= size || duplicate)
      throw IoError(detail::concat(what, ": claims rank ", peer,
                                   ", which is not an expected peer"));
    return std::make_shared<TcpConnection>(std::move(socket), *this, rank, size,
                                           static_cast<int>(peer));
  } catch (const Error& e) {
    log::logger("tcp")->warn("rejected {}", e.what());
    return nullptr;
  }
}

}  // namespace hvd::collectives::tcp
