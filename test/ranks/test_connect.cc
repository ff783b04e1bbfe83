#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include "collectives/algorithms/allreduce.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "test/ranks/run_ranks.h"

using namespace hvd;
using namespace hvd::collectives;
using test::messageOf;
namespace asio = boost::asio;

namespace {

std::exception_ptr runRank(int rank, int n, rendezvous::Store& store, const std::string& secret,
                           std::chrono::milliseconds timeout,
                           const std::function<void(Comm&)>& fn = nullptr) {
  try {
    auto device = tcp::TcpDevice::create("127.0.0.1", secret);
    auto comm = device->connectAll(rank, n, store, timeout, timeout);
    if (fn) fn(*comm);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

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
  std::array<uint8_t, 64> forged{};
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
  CHECK_THAT(messageOf(e0), Catch::Contains("rank 0/3") &&
                                Catch::Contains("ranks {2} never joined the rendezvous"));
  CHECK_THAT(messageOf(e1), Catch::Contains("rank 1/3") && Catch::Contains("ranks {2}"));

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
