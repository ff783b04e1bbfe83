#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <filesystem>

#include "collectives/algorithms/allreduce.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "common/auth.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using test::messageOf;
namespace asio = boost::asio;

namespace {

std::exception_ptr runRank(int rank, int n, rendezvous::Store& store, const std::string& secret,
                           std::chrono::milliseconds timeout,
                           const std::function<void(Comm&)>& fn = nullptr,
                           std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(5),
                           LinkShape shape = LinkShape::AllPairs) {
  try {
    auto device = tcp::TcpDevice::create("127.0.0.1", secret, 0, {}, handshakeTimeout);
    auto comm = device->connectAll(rank, n, store, timeout, timeout, shape);
    if (fn) fn(*comm);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

uint16_t portOf(const rendezvous::Bytes& address) {
  std::string a(address.begin(), address.end());
  return static_cast<uint16_t>(std::stoi(a.substr(a.rfind(':') + 1)));
}

std::vector<uint8_t> claim(uint32_t from, uint32_t to) {
  std::vector<uint8_t> out;
  for (uint32_t v : {from, to})
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  return out;
}

// Sockets this process holds open (listening, connected or connecting).
int openSockets() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (!ec && target.string().rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("a star of links connects rank 0 to each rank and no other pair") {
  // The engine's control links: 4 ranks open 3 links (6 sockets in this one process), where
  // all pairs open 6 (12 sockets); a pair left out is refused by name, not dereferenced.
  constexpr int kRanks = 4;
  auto sockets = [](LinkShape shape) {
    rendezvous::InMemoryStore store;
    int before = openSockets();
    std::atomic<int> linked{0}, counted{0};
    int during = -1;
    std::atomic<int> wrongMessages{0};  // Catch's assertions are for the main thread only
    std::vector<std::string> refusals(kRanks), errors(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        errors[r] = messageOf(runRank(
            r, kRanks, store, "s", std::chrono::seconds(5),
            [&](Comm& comm) {
              // A message each way on every link rank 0 has; the others answer it.
              int32_t out = r, in = -1;
              for (int peer = 0; peer < kRanks; ++peer) {
                if (peer == r || (shape == LinkShape::StarAroundRankZero && r != 0 && peer != 0))
                  continue;
                auto send = comm.peer(peer).isend(asBytes(&out, sizeof out), 7);
                comm.peer(peer).irecv(asWritableBytes(&in, sizeof in), 7).wait(comm.deadline());
                send.wait(comm.deadline());
                wrongMessages += in != peer;
              }
              if (++linked == kRanks) {
                during = openSockets() - before;
                counted = 1;
              }
              while (!counted) std::this_thread::sleep_for(std::chrono::milliseconds(5));
              if (r != 0)
                refusals[r] = messageOf([&] {
                  try {
                    comm.peer(r == 1 ? 2 : 1);
                    return std::exception_ptr();
                  } catch (...) {
                    return std::current_exception();
                  }
                }());
            },
            std::chrono::seconds(5), shape));
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors) CHECK(e == "");
    CHECK(wrongMessages == 0);
    return std::make_pair(during, refusals);
  };
  auto [star, refused] = sockets(LinkShape::StarAroundRankZero);
  CHECK(star == 2 * (kRanks - 1));
  CHECK_THAT(refused[1], Catch::Contains("rank 1/4: no link to rank 2"));
  CHECK_THAT(refused[3], Catch::Contains("rank 3/4: no link to rank 1"));
  auto [all, none] = sockets(LinkShape::AllPairs);
  CHECK(all == kRanks * (kRanks - 1));
  CHECK(none[1] == "");
}

TEST_CASE("silent strangers on a rank's port delay nobody: handshakes run side by side") {
  // Three connections that never speak, made while rank 0 waits for its peers. One at a time
  // with a 10 s handshake deadline each, they held the job for 30 s; side by side, the peers
  // connect at once, well inside a 3 s start timeout.
  rendezvous::InMemoryStore store;
  std::exception_ptr e[3];
  auto timeout = std::chrono::seconds(3);
  std::thread rank0(
      [&] { e[0] = runRank(0, 3, store, "s", timeout, nullptr, std::chrono::seconds(10)); });
  uint16_t port = portOf(store.waitGet("tcp/0", std::chrono::seconds(5)));
  asio::io_context io;
  std::vector<asio::ip::tcp::socket> strangers;
  for (int i = 0; i < 3; ++i) {
    strangers.emplace_back(io);
    strangers.back().connect({asio::ip::make_address("127.0.0.1"), port});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 has accepted them
  std::thread rank1([&] { e[1] = runRank(1, 3, store, "s", timeout); });
  std::thread rank2([&] { e[2] = runRank(2, 3, store, "s", timeout); });
  rank0.join();
  rank1.join();
  rank2.join();
  for (auto& x : e) CHECK(messageOf(x) == "");
}

TEST_CASE("a rank's port closes once its peers are connected") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  std::atomic<bool> connected{false}, checked{false};
  uint16_t port = 0;
  std::thread rank0([&] {
    e0 = runRank(0, 2, store, "s", std::chrono::seconds(5), [&](Comm&) {
      connected = true;
      while (!checked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  });
  port = portOf(store.waitGet("tcp/0", std::chrono::seconds(5)));
  std::thread rank1([&] { e1 = runRank(1, 2, store, "s", std::chrono::seconds(5)); });
  while (!connected) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  asio::io_context io;
  asio::ip::tcp::socket late(io);
  boost::system::error_code ec;
  late.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  checked = true;
  rank0.join();
  rank1.join();
  CHECK(ec == asio::error::connection_refused);
  CHECK(messageOf(e0) == "");
  CHECK(messageOf(e1) == "");
}

TEST_CASE("the claimed ranks are bound into the proof: a peer cannot claim what it did not prove") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  auto timeout = std::chrono::seconds(3);
  std::thread rank0([&] { e0 = runRank(0, 2, store, "s", timeout); });
  uint16_t port = portOf(store.waitGet("tcp/0", std::chrono::seconds(5)));
  auto attempt = [&](const std::vector<uint8_t>& proven, const std::vector<uint8_t>& sent) {
    // Proves `proven` with the right secret, but sends `sent` as the claim.
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), port});
    std::array<uint8_t, 36> hello{};
    asio::read(s, asio::buffer(hello));
    auth::Nonce theirs{}, mine = auth::randomNonce();
    std::copy(hello.begin() + 4, hello.end(), theirs.begin());
    std::string context = "hvd-tcp" + std::string(proven.begin(), proven.end());
    auto proof = auth::connectorProof("s", theirs, mine, context);
    std::vector<asio::const_buffer> out = {asio::buffer(mine), asio::buffer(proof),
                                           asio::buffer(sent)};
    asio::write(s, out);
    boost::system::error_code ec;
    std::array<uint8_t, 32> answer{};
    asio::read(s, asio::buffer(answer), ec);
    return ec;
  };
  // Proven as rank 1 but claiming rank 5: the proof fails.
  CHECK(attempt(claim(1, 0), claim(5, 0)) == asio::error::eof);
  // Proven and claimed, but for a rank that does not exist: authenticated, then dropped.
  attempt(claim(7, 0), claim(7, 0));
  std::thread rank1([&] { e1 = runRank(1, 2, store, "s", timeout); });
  rank0.join();
  rank1.join();
  CHECK(messageOf(e0) == "");
  CHECK(messageOf(e1) == "");
}

TEST_CASE("a connection without the job secret is dropped and the job still connects") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  std::thread rank0([&] { e0 = runRank(0, 2, store, "right", std::chrono::seconds(5)); });
  // The intruder connects first, while rank 0 is accepting, and answers with a made-up proof.
  auto value = store.waitGet("tcp/0", std::chrono::seconds(5));
  std::string address(value.begin(), value.end());
  asio::io_context io;
  asio::ip::tcp::socket intruder(io);
  intruder.connect({asio::ip::make_address("127.0.0.1"),
                    static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)))});
  std::array<uint8_t, 36> hello{};
  asio::read(intruder, asio::buffer(hello));
  std::array<uint8_t, 72> forged{};  // nonce, proof and claimed ranks
  asio::write(intruder, asio::buffer(forged));
  boost::system::error_code ec;
  std::array<uint8_t, 1> byte{};
  asio::read(intruder, asio::buffer(byte), ec);  // rank 0 closes on us
  std::thread rank1([&] { e1 = runRank(1, 2, store, "right", std::chrono::seconds(5)); });
  rank0.join();
  rank1.join();
  CHECK(ec == asio::error::eof);
  REQUIRE(messageOf(e0) == "");
  REQUIRE(messageOf(e1) == "");
}

TEST_CASE("a rank with the wrong secret fails authentication") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  std::thread rank0([&] { e0 = runRank(0, 2, store, "right", std::chrono::seconds(2)); });
  std::thread rank1([&] { e1 = runRank(1, 2, store, "wrong", std::chrono::seconds(2)); });
  rank0.join();
  rank1.join();
  CHECK_THAT(messageOf(e1), Catch::Contains("authentication failed"));
  CHECK_THAT(messageOf(e0), Catch::Contains("timed out") &&
                                Catch::Contains("ranks {1} joined but did not connect"));
}

TEST_CASE("a connect timeout names the ranks that never showed up") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  auto timeout = std::chrono::milliseconds(1500);
  std::thread rank0([&] { e0 = runRank(0, 3, store, "s", timeout); });
  std::thread rank1([&] { e1 = runRank(1, 3, store, "s", timeout); });
  rank0.join();
  rank1.join();
  // Rank 0 gathers the address table for every rank, so both see rank 2 missing from it.
  CHECK_THAT(messageOf(e0), Catch::Contains("rank 0/3") &&
                                Catch::Contains("ranks {2} to publish their addresses"));
  CHECK_THAT(messageOf(e1), Catch::Contains("rank 1/3") &&
                                Catch::Contains("ranks {2} to publish their addresses"));

  rendezvous::InMemoryStore store2;
  auto e2 = runRank(2, 3, store2, "s", timeout);  // alone: ranks 0 and 1 never publish
  CHECK_THAT(messageOf(e2), Catch::Contains("ranks {0,1} to publish their addresses"));
}

TEST_CASE("an operation with a dead peer fails naming that peer") {
  rendezvous::InMemoryStore store;
  std::exception_ptr e0, e1;
  std::thread rank0([&] {
    e0 = runRank(0, 2, store, "s", std::chrono::seconds(5), [](Comm& comm) {
      std::vector<float> v(1000, 1.0f);
      allreduce(comm, v.data(), v.data(), v.size(), DType::Float32, ReduceOp::Sum);
    });
  });
  // Rank 1 connects and leaves at once, closing its sockets.
  std::thread rank1([&] { e1 = runRank(1, 2, store, "s", std::chrono::seconds(5)); });
  rank0.join();
  rank1.join();
  REQUIRE(messageOf(e1) == "");
  CHECK_THAT(messageOf(e0), Catch::Contains("rank 0/2") && Catch::Contains("rank 1") &&
                                Catch::Contains("closed by peer"));
}
