// io::HandshakeDialer against real loopback listeners: authenticated links to several at once,
// concurrent connects, retries, and how each dial fails (refused, silent, a stranger's protocol,
// the wrong secret), on one io_context driven by the test's thread as a rank drives its device.
#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <map>
#include <optional>

#include "common/error.h"
#include "common/handshake_dialer.h"
#include "common/handshake_listener.h"
#include "test/ranks/run_ranks.h"
#include "test/ranks/test_time.h"

using namespace hvd;
using namespace std::chrono_literals;
using test::messageOf;
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kContext = "hvd-test-dialer";

struct Ended {
  std::optional<tcp::socket> socket;
  std::exception_ptr error;
};

// A dialer on `io` whose ends are recorded by dial number.
struct RecordingDialer {
  RecordingDialer(asio::io_context& io, const std::string& secret)
      : dialer(io, {secret, kContext, 0},
               [this](std::size_t dial, tcp::socket s, std::exception_ptr e) {
                 REQUIRE(ended.count(dial) == 0);  // each dial ends once
                 ended[dial] = {e ? std::nullopt : std::optional<tcp::socket>(std::move(s)), e};
               }) {}
  std::map<std::size_t, Ended> ended;
  io::HandshakeDialer dialer;
};

tcp::acceptor listeningAcceptor(asio::io_context& io) {
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  a.listen();
  return a;
}

uint16_t portOf(const tcp::acceptor& a) { return a.local_endpoint().port(); }

// Runs `io` until `done` or the time limit; true when done.
template <typename Done>
bool runUntil(asio::io_context& io, Done done, std::chrono::milliseconds limit) {
  auto until = Clock::now() + limit;
  while (!done() && Clock::now() < until) {
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  return done();
}

std::vector<uint8_t> claimOf(uint8_t b) { return {b, static_cast<uint8_t>(b + 1)}; }

}  // namespace

TEST_CASE("a dialer links to several listeners at once, each proving its claim") {
  asio::io_context io;
  std::vector<tcp::acceptor> acceptors;
  acceptors.reserve(3);  // the listeners keep references to them
  std::vector<std::unique_ptr<io::HandshakeListener>> listeners;
  std::map<uint16_t, std::vector<uint8_t>> claimsByPort;
  for (int i = 0; i < 3; ++i) {
    acceptors.push_back(listeningAcceptor(io));
    uint16_t port = portOf(acceptors.back());
    listeners.push_back(std::make_unique<io::HandshakeListener>(
        acceptors.back(),
        io::ListenerOptions{
            .name = "listener", .secret = "s3cret", .context = kContext, .claimBytes = 2},
        [&claimsByPort, port](tcp::socket, std::vector<uint8_t> claim) {
          claimsByPort[port] = claim;
        }));
    listeners.back()->start();
  }
  RecordingDialer d(io, "s3cret");
  auto deadline = Clock::now() + test::scaled(10s);
  std::vector<uint16_t> ports;
  for (int i = 0; i < 3; ++i) {
    ports.push_back(portOf(acceptors[static_cast<std::size_t>(i)]));
    CHECK(d.dialer.dial("127.0.0.1", ports.back(), claimOf(static_cast<uint8_t>(10 * i)), deadline,
                        "dial " + std::to_string(i)) == static_cast<std::size_t>(i));
  }
  CHECK(d.dialer.unfinished() == 3);
  REQUIRE(runUntil(
      io, [&] { return d.ended.size() == 3 && claimsByPort.size() == 3; }, test::scaled(10s)));
  CHECK(d.dialer.unfinished() == 0);
  for (int i = 0; i < 3; ++i) {
    const Ended& e = d.ended[static_cast<std::size_t>(i)];
    INFO("dial " << i << ": " << messageOf(e.error));
    CHECK_FALSE(e.error);
    REQUIRE(e.socket.has_value());
    CHECK(e.socket->is_open());
    CHECK(e.socket->remote_endpoint().port() == ports[static_cast<std::size_t>(i)]);
    CHECK(claimsByPort[ports[static_cast<std::size_t>(i)]] ==
          claimOf(static_cast<uint8_t>(10 * i)));
  }
}

TEST_CASE("a dialer connects to every peer before any of them answers") {
  // Peers that accept and stay silent: a dialer that waited for one handshake before the next
  // connect would have reached only the first of them.
  asio::io_context io;
  std::vector<tcp::acceptor> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(listeningAcceptor(io));
  RecordingDialer d(io, "s3cret");
  auto deadline = Clock::now() + test::scaled(10s);
  for (auto& a : silent) d.dialer.dial("127.0.0.1", portOf(a), claimOf(1), deadline, "silent");
  std::vector<tcp::socket> accepted;
  for (auto& a : silent) a.non_blocking(true);
  REQUIRE(runUntil(
      io,
      [&] {
        for (auto& a : silent) {
          boost::system::error_code ec;
          tcp::socket s = a.accept(ec);
          if (!ec) accepted.push_back(std::move(s));
        }
        return accepted.size() == silent.size();
      },
      test::scaled(5s)));
  CHECK(d.dialer.unfinished() == silent.size());
  CHECK(d.ended.empty());
  // Each peer hangs up without a word: each dial says so, naming the peer and the bytes.
  for (auto& s : accepted) s.close();
  REQUIRE(runUntil(
      io, [&] { return d.ended.size() == silent.size(); }, test::scaled(5s)));
  for (auto& [dial, e] : d.ended) {
    std::string m = messageOf(e.error);
    CHECK_THAT(m, Catch::StartsWith("silent: handshake: connection closed by 127.0.0.1:"));
    CHECK_THAT(m, Catch::EndsWith("after 0/36 bytes"));
  }
}

TEST_CASE("a dialer retries a refused connection until the peer listens") {
  asio::io_context io;
  uint16_t port = 0;
  {
    auto probe = listeningAcceptor(io);
    port = portOf(probe);
  }  // closed: connects to the port are refused until the listener below opens it
  RecordingDialer d(io, "s3cret");
  d.dialer.dial("127.0.0.1", port, claimOf(7), Clock::now() + test::scaled(10s), "late peer");
  runUntil(
      io, [] { return false; }, 50ms);  // a few refused attempts
  CHECK(d.ended.empty());
  tcp::acceptor late(io);
  late.open(tcp::v4());
  late.set_option(asio::socket_base::reuse_address(true));
  late.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  late.listen();
  std::vector<uint8_t> claim;
  io::HandshakeListener listener(
      late, {.name = "late", .secret = "s3cret", .context = kContext, .claimBytes = 2},
      [&](tcp::socket, std::vector<uint8_t> c) { claim = c; });
  listener.start();
  REQUIRE(runUntil(
      io, [&] { return d.ended.size() == 1 && !claim.empty(); }, test::scaled(10s)));
  CHECK(messageOf(d.ended[0].error) == "");
  CHECK(claim == claimOf(7));
}

TEST_CASE("a dial that cannot succeed says why, naming the peer and the step") {
  asio::io_context io;
  RecordingDialer d(io, "s3cret");

  SECTION("nobody listens: refused until the deadline") {
    uint16_t port = 0;
    {
      auto probe = listeningAcceptor(io);
      port = portOf(probe);
    }
    auto start = Clock::now();
    d.dialer.dial("127.0.0.1", port, claimOf(1), start + 300ms, "rank 2/4: connect to rank 1");
    REQUIRE(runUntil(
        io, [&] { return d.ended.size() == 1; }, test::scaled(5s)));
    std::string m = messageOf(d.ended[0].error);
    CHECK_THAT(m, Catch::StartsWith("rank 2/4: connect to rank 1: connect to 127.0.0.1:" +
                                    std::to_string(port) + ": "));
    CHECK_THAT(m, Catch::Contains("refused"));
    CHECK(Clock::now() - start >= 200ms);  // it kept trying until close to the deadline
  }

  SECTION("a peer that accepts and never answers: the dial's deadline") {
    auto silent = listeningAcceptor(io);
    d.dialer.dial("127.0.0.1", portOf(silent), claimOf(1), Clock::now() + 300ms, "silent peer");
    REQUIRE(runUntil(
        io, [&] { return d.ended.size() == 1; }, test::scaled(5s)));
    CHECK_THROWS_AS(std::rethrow_exception(d.ended[0].error), TimeoutError);
    CHECK(messageOf(d.ended[0].error) ==
          "silent peer: connect to 127.0.0.1:" + std::to_string(portOf(silent)) + ": timed out");
  }

  SECTION("a peer that speaks another protocol") {
    auto other = listeningAcceptor(io);
    d.dialer.dial("127.0.0.1", portOf(other), claimOf(1), Clock::now() + test::scaled(5s),
                  "web server");
    tcp::socket s(io);
    other.async_accept([&](boost::system::error_code ec, tcp::socket accepted) {
      if (ec) return;
      s = std::move(accepted);
      static const std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n0123456789";
      asio::write(s, asio::buffer(reply));
    });
    REQUIRE(runUntil(
        io, [&] { return d.ended.size() == 1; }, test::scaled(5s)));
    CHECK_THAT(
        messageOf(d.ended[0].error),
        Catch::Matches("web server: 127\\.0\\.0\\.1:[0-9]+ does not speak the hvd protocol"));
  }

  SECTION("a listener with another secret") {
    auto acceptor = listeningAcceptor(io);
    bool accepted = false;
    io::HandshakeListener listener(
        acceptor, {.name = "other job", .secret = "another", .context = kContext, .claimBytes = 2},
        [&](tcp::socket, std::vector<uint8_t>) { accepted = true; });
    listener.start();
    d.dialer.dial("127.0.0.1", portOf(acceptor), claimOf(1), Clock::now() + test::scaled(5s),
                  "rank 1/2: connect to rank 0");
    REQUIRE(runUntil(
        io, [&] { return d.ended.size() == 1; }, test::scaled(5s)));
    CHECK_FALSE(accepted);
    CHECK_THAT(
        messageOf(d.ended[0].error),
        Catch::StartsWith("rank 1/2: connect to rank 0: authentication failed: 127.0.0.1:") &&
            Catch::Contains("closed the connection after our proof") &&
            Catch::Contains("HVD_SECRET"));
    CHECK(listener.rejected() == 1);
  }
}

TEST_CASE("a stopped dialer ends its dials without calling back") {
  asio::io_context io;
  auto silent = listeningAcceptor(io);
  RecordingDialer d(io, "s3cret");
  d.dialer.dial("127.0.0.1", portOf(silent), claimOf(1), Clock::now() + 200ms, "silent");
  runUntil(
      io, [] { return false; }, 50ms);  // connected, waiting for the hello
  d.dialer.stop();
  CHECK(d.dialer.unfinished() == 0);
  runUntil(
      io, [] { return false; }, 400ms);  // past the deadline: its timer must not report
  CHECK(d.ended.empty());
  CHECK_THROWS_WITH(d.dialer.dial("127.0.0.1", portOf(silent), claimOf(1), Clock::now() + 1s, "x"),
                    Catch::Contains("after stop()"));
}
