// ConnectSlots, and the preflight's bound on the hosts it connects to at once. The preflight
// test talks to loopback listeners that accept and never speak SSH (no sshd): each check waits
// for a greeting until its connect timeout, which makes the waves of a bounded pool visible.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "launcher/ssh/connect_slots.h"
#include "launcher/ssh/ssh_preflight.h"

using hvd::launcher::ssh::CheckInterrupt;
using hvd::launcher::ssh::ConnectSlots;
using Clock = std::chrono::steady_clock;

TEST_CASE("connect slots: at most the limit are held, and a freed one goes to a waiter") {
  ConnectSlots slots(2);
  auto a = slots.acquire();
  auto b = slots.acquire();
  REQUIRE(a);
  REQUIRE(b);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto c = slots.acquire();
    got = true;
  });
  // The waiter cannot get a slot until one is given back; it gets the freed one.
  CHECK_FALSE(got);
  a = ConnectSlots::Slot();
  waiter.join();
  CHECK(got);
  CHECK(slots.peak() == 2);
  CHECK_THROWS_WITH(ConnectSlots(0), Catch::Contains("--ssh-concurrency"));
}

TEST_CASE("connect slots: many threads never hold more than the limit") {
  ConnectSlots slots(3);
  std::mutex mutex;
  int held = 0, most = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto slot = slots.acquire();
        {
          std::lock_guard<std::mutex> lock(mutex);
          most = std::max(most, ++held);
        }
        std::this_thread::yield();
        std::lock_guard<std::mutex> lock(mutex);
        --held;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(most <= 3);
  CHECK(slots.peak() <= 3);
}

TEST_CASE("connect slots: an interrupted wait returns an empty slot") {
  ConnectSlots slots(1);
  auto only = slots.acquire();
  CheckInterrupt interrupt;
  bool empty = false;
  std::thread waiter([&] { empty = !slots.acquire(&interrupt); });
  interrupt.interrupt();
  waiter.join();
  CHECK(empty);
  CHECK_FALSE(slots.acquire(&interrupt));  // already interrupted: at once, even with a slot
}

namespace {

// Loopback listeners that accept and stay silent, counting the connections open at once across
// all of them (a connection is open from its accept until the client closes it).
class SilentHosts {
 public:
  explicit SilentHosts(int count) {
    for (int i = 0; i < count; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      REQUIRE(::listen(fd, 64) == 0);
      socklen_t len = sizeof a;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      listeners_.push_back(fd);
      ports_.push_back(ntohs(a.sin_port));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~SilentHosts() {
    stop_ = true;
    thread_.join();
    for (int fd : listeners_) ::close(fd);
    for (int fd : open_) ::close(fd);
  }
  const std::vector<int>& ports() const { return ports_; }
  int mostOpen() const { return mostOpen_; }
  int accepted() const { return accepted_; }

 private:
  // Reads what the client sent (its SSH banner) up to the end of the stream, if it is there.
  static bool closedByClient(int fd) {
    char buf[256];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) continue;
      return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    }
  }

  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds;
      std::size_t polledOpen = open_.size();
      for (int fd : open_) fds.push_back({fd, POLLIN, 0});
      for (int fd : listeners_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      // Closes first, then accepts: a client that closed before the next one connected is
      // never counted together with it.
      std::vector<int> still;
      for (std::size_t i = 0; i < polledOpen; ++i) {
        if (fds[i].revents && closedByClient(open_[i]))
          ::close(open_[i]);
        else
          still.push_back(open_[i]);
      }
      open_ = still;
      for (std::size_t i = 0; i < listeners_.size(); ++i)
        if (fds[polledOpen + i].revents & POLLIN) {
          int c = ::accept4(listeners_[i], nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) continue;
          open_.push_back(c);
          ++accepted_;
          mostOpen_ = std::max<int>(mostOpen_, static_cast<int>(open_.size()));
        }
    }
  }

  std::vector<int> listeners_, ports_, open_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> mostOpen_{0}, accepted_{0};
};

}  // namespace

TEST_CASE("the preflight checks no more hosts at once than its slots, and reports every host") {
  constexpr int kHosts = 9;
  constexpr auto kTimeout = std::chrono::milliseconds(300);
  SilentHosts silent(kHosts);
  std::vector<hvd::launcher::ssh::PreflightHost> hosts;
  for (int i = 0; i < kHosts; ++i) {
    hvd::launcher::ssh::PreflightHost h;
    h.target.alias = "silent" + std::to_string(i);
    h.target.address = "127.0.0.1";
    h.target.port = silent.ports()[i];
    h.target.user = "nobody";
    h.target.connectTimeout = kTimeout;
    hosts.push_back(h);
  }
  ConnectSlots slots(3);
  auto start = Clock::now();
  auto report = hvd::launcher::ssh::preflight(hosts, slots);
  auto elapsed = Clock::now() - start;
  REQUIRE(report.failures.size() == kHosts);
  for (int i = 0; i < kHosts; ++i)
    CHECK_THAT(report.failures[i], Catch::Contains("host 'silent" + std::to_string(i) + "'") &&
                                       Catch::Contains("no SSH greeting"));
  CHECK(silent.accepted() == kHosts);
  CHECK(silent.mostOpen() <= 3);
  CHECK(slots.peak() == 3);
  // Three waves of three silent hosts, each waited on for the connect timeout; all nine at
  // once would take one.
  CHECK(elapsed >= 3 * kTimeout * 9 / 10);
}
