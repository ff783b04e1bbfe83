#include "collectives/transport/tcp/tcp_device.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>
#include <thread>

#include "collectives/rendezvous/rank_table.h"
#include "collectives/transport/tcp/tcp_connection.h"
#include "common/asio_io.h"
#include "common/format.h"
#include "common/handshake_dialer.h"
#include "common/handshake_listener.h"
#include "common/logging.h"
#include "common/spin.h"

namespace hvd::collectives::tcp {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

const std::string kAuthContext = "hvd-tcp";
constexpr std::chrono::microseconds kNoSpin{0};
// Unauthenticated connections a rank's listener holds at once (a new one evicts the oldest),
// beyond one per peer it expects: at 64 ranks, rank 0's 63 peers connect within a millisecond,
// and with 16 in all the 17th evicted a peer before that peer's thread had run to answer
// (connectAll failed with "authentication failed" now and then).
constexpr std::size_t kStrangerHandshakes = 16;

std::pair<std::string, uint16_t> splitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  HVD_ENFORCE(colon != std::string::npos, "malformed peer address '", address, "'");
  return {address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1)))};
}

// What a connecting rank claims, bound into its handshake proof: its rank and the rank it
// means to reach, big-endian.
constexpr std::size_t kClaimBytes = 8;

std::vector<uint8_t> claimOf(int from, int to) {
  std::vector<uint8_t> out;
  for (uint32_t v : {static_cast<uint32_t>(from), static_cast<uint32_t>(to)})
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  return out;
}

uint32_t claimed(const std::vector<uint8_t>& claim, std::size_t at) {
  uint32_t v = 0;
  for (std::size_t i = at; i < at + 4; ++i) v = (v << 8) | claim[i];
  return v;
}

}  // namespace

std::shared_ptr<TcpDevice> TcpDevice::create(const std::string& bindAddress, std::string secret,
                                             std::size_t socketBufferBytes, WaitPolicy waits,
                                             std::chrono::milliseconds handshakeTimeout,
                                             std::shared_ptr<log::Logs> logs) {
  return std::shared_ptr<TcpDevice>(new TcpDevice(bindAddress, std::move(secret), socketBufferBytes,
                                                  waits, handshakeTimeout, std::move(logs)));
}

TcpDevice::TcpDevice(const std::string& bindAddress, std::string secret,
                     std::size_t socketBufferBytes, WaitPolicy waits,
                     std::chrono::milliseconds handshakeTimeout, std::shared_ptr<log::Logs> logs)
    : secret_(std::move(secret)),
      socketBufferBytes_(socketBufferBytes),
      waits_(waits),
      handshakeTimeout_(handshakeTimeout),
      logs_(std::move(logs)) {
  error_code ec;
  auto address = asio::ip::make_address(bindAddress, ec);
  if (ec) throw InvalidArgument("tcp: cannot bind '" + bindAddress + "': not an IP address");
  tcp::endpoint endpoint(address, 0);
  acceptor_.open(endpoint.protocol());
  io::setCloseOnExec(acceptor_.native_handle());
  // Accepted sockets inherit these, in time for the handshake that fixes the window scale.
  if (socketBufferBytes_ > 0) io::setBufferSizes(acceptor_, socketBufferBytes_);
  acceptor_.bind(endpoint, ec);
  if (ec) throw IoError("tcp: cannot bind " + bindAddress + ": " + ec.message());
  acceptor_.listen(asio::socket_base::max_listen_connections);
  auto ep = acceptor_.local_endpoint();
  listenAddress_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeFd_ < 0) throw IoError(std::string("tcp: eventfd: ") + std::strerror(errno));
  wakeDescriptor_.assign(wakeFd_);  // closes it with the device
}

std::string TcpDevice::listenAddress() const { return listenAddress_; }

void TcpDevice::progressUntil(Deadline deadline, bool latencyBound) {
  progressWithSpin(deadline, waits_.spins.spinFor(latencyBound));
}

void TcpDevice::progressWithSpin(Deadline deadline, std::chrono::microseconds spin) {
  if (io_.stopped()) io_.restart();
  if (!direct_.empty()) {
    if (asioOperations_ == 0) return pollDirect(deadline, spin);
    handDirectReadsToAsio();
  }
  armWake();
  if (spin.count() > 0 &&
      spinUntil(
          std::min(deadline, Clock::now() + spin), [&] { return io_.poll_one() > 0; }, contention_))
    return;
  io_.run_one_until(deadline);
}

void TcpDevice::pollDirect(Deadline deadline, std::chrono::microseconds spin) {
  pollFds_.assign(1, pollfd{wakeFd_, POLLIN, 0});
  polled_.assign(direct_.begin(), direct_.end());
  for (auto* c : polled_) pollFds_.push_back(pollfd{c->nativeHandle(), POLLIN, 0});
  int ready = 0;
  if (spin.count() > 0)
    spinUntil(
        std::min(deadline, Clock::now() + spin),
        [&] {
          ready = ::poll(pollFds_.data(), pollFds_.size(), 0);
          return ready != 0;
        },
        contention_);
  if (ready == 0 && waits_.mode == WaitMode::Blocking && polled_.size() == 1 &&
      Clock::now() < deadline) {
    if (wakeRequested_) return drainWake();
    return polled_[0]->readDirect(true);
  }
  if (ready == 0) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int timeout = static_cast<int>(std::clamp<decltype(left)>(left, 0, INT_MAX));
    ready = ::poll(pollFds_.data(), pollFds_.size(), timeout);
  }
  if (ready < 0) {
    if (errno == EINTR) return;
    throw IoError(std::string("tcp: poll: ") + std::strerror(errno));
  }
  if (pollFds_[0].revents) drainWake();
  // Reading completes receives, which may start the next ones and change direct_; polled_ is
  // this wait's own copy.
  for (std::size_t i = 0; i < polled_.size(); ++i)
    if (pollFds_[i + 1].revents) polled_[i]->readDirect(false);
}

void TcpDevice::poll() {
  if (io_.stopped()) io_.restart();
  if (!direct_.empty()) {
    if (asioOperations_ == 0)
      pollDirect(Clock::now(), {});
    else
      handDirectReadsToAsio();
  }
  io_.poll();
}

// For a wait that must run Asio's operations too: one run_one then drives everything.
void TcpDevice::handDirectReadsToAsio() {
  // startDirectReadInAsio unwatches, so iterate over a copy.
  for (auto* c : std::vector<TcpConnection*>(direct_)) c->startDirectReadInAsio();
}

void TcpDevice::watch(TcpConnection* connection) { direct_.push_back(connection); }

void TcpDevice::unwatch(TcpConnection* connection) {
  auto it = std::find(direct_.begin(), direct_.end(), connection);
  if (it != direct_.end()) direct_.erase(it);
}

// The eventfd's count stays set until a wait drains it, so a wake() made while no thread is
// waiting ends the next wait: no wake-up is lost. Asio's wait reads it through a speculative
// read (an async_wait could miss a count that was already there).
void TcpDevice::wake() {
  wakeRequested_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wakeFd_, &one, sizeof one);
}

void TcpDevice::armWake() {
  if (wakeArmed_) return;
  wakeArmed_ = true;
  wakeDescriptor_.async_read_some(asio::buffer(&wakeCount_, sizeof wakeCount_),
                                  [this](const error_code&, std::size_t) { wakeArmed_ = false; });
}

void TcpDevice::drainWake() {
  wakeRequested_ = false;
  uint64_t count = 0;
  [[maybe_unused]] auto got = ::read(wakeFd_, &count, sizeof count);
}

std::unique_ptr<Comm> TcpDevice::connectAll(int rank, int size, rendezvous::Store& store,
                                            std::chrono::milliseconds connectTimeout,
                                            std::chrono::milliseconds opTimeout, LinkShape shape) {
  HVD_ENFORCE(rank >= 0 && rank < size, "rank ", rank, " outside [0, ", size, ")");
  auto deadline = Clock::now() + connectTimeout;
  auto linked = [&](int peer) {
    return peer != rank && (shape == LinkShape::AllPairs || rank == 0 || peer == 0);
  };
  int higherPeers = 0;
  for (int r = rank + 1; r < size; ++r) higherPeers += linked(r);
  auto log = log::logger(logs_.get(), "tcp");
  std::string self = detail::concat("rank ", rank, "/", size);
  std::vector<std::shared_ptr<Connection>> connections(size);
  // Higher ranks connect to this one. Their handshakes run on io_ whenever this thread drives
  // it (also while it connects to lower ranks), all at once, so a stranger delays nobody.
  std::vector<std::shared_ptr<Connection>> accepted;
  std::vector<bool> seen(size, false);
  io::HandshakeListener listener(
      acceptor_,
      {self, "tcp", secret_, kAuthContext, kClaimBytes, handshakeTimeout_,
       kStrangerHandshakes + static_cast<std::size_t>(higherPeers), logs_},
      [&](tcp::socket socket, std::vector<uint8_t> claim) {
        uint32_t from = claimed(claim, 0), to = claimed(claim, 4);
        if (to != static_cast<uint32_t>(rank) || from <= static_cast<uint32_t>(rank) ||
            from >= static_cast<uint32_t>(size) || !linked(static_cast<int>(from)) || seen[from]) {
          log->warn(
              "{}: dropped the connection from {}: it proved rank {} connecting to rank "
              "{}, which is not a peer this rank expects{}",
              self, io::peerName(socket), from, to,
              from < static_cast<uint32_t>(size) && seen[from] ? " (already connected)" : "");
          return;
        }
        seen[from] = true;
        accepted.push_back(std::make_shared<TcpConnection>(std::move(socket), *this, rank, size,
                                                           static_cast<int>(from),
                                                           waits_.mode == WaitMode::Blocking));
      });
  listener.start();
  log->info("{}: listening on {}", self, listenAddress());
  auto addresses = gatherAddresses(rank, size, store, connectTimeout, self, shape);
  // Lower ranks accept and higher ranks connect. Every connect and handshake runs at once on
  // io_, with the accepts: at 64 ranks on 2 cores, connecting to 63 peers one after the other
  // took a quarter of a second of the launch (each waits for its peer's process to be
  // scheduled, twice); at once, the peers answer them in batches.
  std::vector<int> dialled;  // by dial number
  std::exception_ptr dialError;
  io::HandshakeDialer dialer(io_, {secret_, kAuthContext, socketBufferBytes_},
                             [&](std::size_t dial, tcp::socket socket, std::exception_ptr error) {
                               if (error) {
                                 if (!dialError) dialError = error;
                                 return;
                               }
                               int peer = dialled[dial];
                               connections[peer] = std::make_shared<TcpConnection>(
                                   std::move(socket), *this, rank, size, peer,
                                   waits_.mode == WaitMode::Blocking);
                             });
  for (int r = 0; r < rank; ++r) {
    if (!linked(r)) continue;
    std::string address(addresses[r].begin(), addresses[r].end());
    auto [host, port] = splitAddress(address);
    dialled.push_back(r);
    dialer.dial(host, port, claimOf(rank, r), deadline,
                detail::concat(self, ": connect to rank ", r, " (", address, ")"));
  }
  auto nextCheck = Clock::now() + std::chrono::seconds(1);
  while (dialer.unfinished() > 0 || static_cast<int>(accepted.size()) < higherPeers) {
    if (dialError) std::rethrow_exception(dialError);
    auto now = Clock::now();
    if (now >= deadline) {
      io_.poll();  // a dial's own deadline, due now, names its step
      if (dialError) std::rethrow_exception(dialError);
      // Every rank published its address (the table holds them all), so a missing peer joined
      // the rendezvous and then did not connect. A star's centre reads no table.
      std::set<int> silent;
      for (int r = rank + 1; r < size; ++r)
        if (linked(r)) silent.insert(r);
      for (auto& c : accepted) silent.erase(c->peerRank());
      throw TimeoutError(detail::concat(
          self, ": timed out after ", connectTimeout.count() / 1000.0,
          " s waiting for peers to connect: ranks ", rankSet(silent),
          shape == LinkShape::AllPairs ? " joined but did not connect" : " did not connect",
          " (did they start? HVD_START_TIMEOUT sets the limit)"));
    }
    if (now >= nextCheck) {
      // A job that gave up on this rendezvous (an elastic job's superseded round) is noticed
      // before the deadline.
      store.checkAbandoned();
      nextCheck = now + std::chrono::seconds(1);
    }
    // Peers connect when they start: nothing to gain by polling for them.
    progressWithSpin(std::min(deadline, nextCheck), kNoSpin);
  }
  if (dialError) std::rethrow_exception(dialError);
  dialer.stop();
  listener.stop();  // closes the listening socket: nobody may connect after set-up
  for (auto& c : accepted) connections[c->peerRank()] = c;
  log->debug("{}: connected to {} peers", self,
             std::count_if(connections.begin(), connections.end(),
                           [](const auto& c) { return c != nullptr; }));
  return std::make_unique<Comm>(rank, size, std::move(connections), opTimeout, shared_from_this());
}

std::vector<rendezvous::Bytes> TcpDevice::gatherAddresses(int rank, int size,
                                                          rendezvous::Store& store,
                                                          std::chrono::milliseconds timeout,
                                                          const std::string& self,
                                                          LinkShape shape) {
  std::string mine = listenAddress();
  std::vector<rendezvous::Bytes> table;
  std::exception_ptr error;
  std::atomic<bool> done{false};
  // This thread is the only one to touch the store until the helper is done (TcpStoreClient
  // holds one request at a time, and the helper's wait is long); it serves the listener.
  std::thread helper([&] {
    pthread_setname_np(pthread_self(), "hvd-rdzv-tcp");
    try {
      rendezvous::Bytes value(mine.begin(), mine.end());
      if (shape == LinkShape::StarAroundRankZero) {
        table.resize(static_cast<std::size_t>(size));
        table[0] = rendezvous::shareRankZeroValue(store, "tcp/", rank, value, timeout);
      } else {
        table = rendezvous::gatherRankTable(store, "tcp/", rank, size, value, timeout);
      }
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
    wake();  // after `done`: the wait below sees it, or the eventfd ends its sleep
  });
  try {
    while (!done) progressWithSpin(Clock::now() + std::chrono::seconds(1), kNoSpin);
  } catch (...) {
    helper.join();
    throw;
  }
  helper.join();
  try {
    if (error) std::rethrow_exception(error);
  } catch (const rendezvous::RankTableTimeout& e) {
    throw TimeoutError(detail::concat(self, ": timed out after ", timeout.count() / 1000.0,
                                      " s waiting for ranks ", rankSet(e.missingRanks()),
                                      " to publish their addresses (did they start? "
                                      "HVD_START_TIMEOUT sets the limit)"));
  }
  return table;
}

}  // namespace hvd::collectives::tcp
