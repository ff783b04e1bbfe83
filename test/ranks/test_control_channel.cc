#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "runtime/engine/control_channel.h"
#include "test/ranks/test_time.h"

using namespace hvd;
using hvd::runtime::ControlChannel;

namespace {

// Two connected control channels (rank 0 listens to rank 1 and the other way round).
struct ChannelPair {
  std::unique_ptr<ControlChannel> channel[2];

  ChannelPair() {
    rendezvous::InMemoryStore store;
    std::unique_ptr<collectives::Comm> comms[2];
    std::thread t[2];
    for (int r = 0; r < 2; ++r)
      t[r] = std::thread([&, r] {
        auto device = collectives::tcp::TcpDevice::create("127.0.0.1", "s");
        comms[r] =
            device->connectAll(r, 2, store, std::chrono::seconds(5), std::chrono::seconds(5));
      });
    for (auto& th : t) th.join();
    for (int r = 0; r < 2; ++r)
      channel[r] = std::make_unique<ControlChannel>(std::move(comms[r]), std::vector<int>{1 - r});
  }
};

double secondsToWait(ControlChannel& channel) {
  auto start = std::chrono::steady_clock::now();
  channel.waitForActivity(start + std::chrono::seconds(20));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// The engine looks at its queue, then receive()s (which polls the transport), then waits: a
// submission's wake() landing between the first two must still end the wait.
TEST_CASE("a wake-up that a receive polled past still ends the next wait") {
  ChannelPair pair;
  pair.channel[0]->wake();
  REQUIRE(pair.channel[0]->receive().empty());
  REQUIRE(secondsToWait(*pair.channel[0]) < 10.0 * test::timeScale());
}

TEST_CASE("a wake-up from another thread ends a wait in progress") {
  ChannelPair pair;
  pair.channel[0]->receive();
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pair.channel[0]->wake();
  });
  double waited = secondsToWait(*pair.channel[0]);
  waker.join();
  REQUIRE(waited < 10.0 * test::timeScale());
}

TEST_CASE("a message ends the peer's wait and is received whole") {
  ChannelPair pair;
  std::string big(5000, 'x');
  std::thread sender([&] {
    pair.channel[1]->send(0, "hello");
    pair.channel[1]->send(0, big);
  });
  std::vector<std::pair<int, std::string>> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    pair.channel[0]->waitForActivity(deadline);
    for (auto& m : pair.channel[0]->receive()) got.push_back(m);
  }
  sender.join();
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::make_pair(1, std::string("hello")));
  CHECK(got[1] == std::make_pair(1, big));
}

TEST_CASE("a message larger than the link buffers is queued: two sending at once both return") {
  // Each side sends more than loopback TCP buffers before the other receives anything. A send
  // that waited for the peer to read would wait for a peer waiting in its own send.
  ChannelPair pair;
  const std::string big[2] = {std::string(32 << 20, 'a'), std::string(32 << 20, 'b')};
  std::string got[2];
  std::thread t[2];
  for (int r = 0; r < 2; ++r)
    t[r] = std::thread([&, r] {
      auto& channel = *pair.channel[r];
      channel.send(1 - r, big[r]);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (got[r].empty() && std::chrono::steady_clock::now() < deadline) {
        for (auto& [peer, message] : channel.receive()) got[r] = std::move(message);
        channel.waitForActivity(
            std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
      }
      channel.flush(deadline);
    });
  for (auto& th : t) th.join();
  CHECK(got[0] == big[1]);
  CHECK(got[1] == big[0]);
}
