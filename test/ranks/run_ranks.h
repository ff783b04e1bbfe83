// Runs N ranks as threads in this process, each with its own device (TCP on 127.0.0.1, or shared
// memory) and one shared InMemoryStore (Gloo's BaseTest::spawn). runRanks rethrows the first rank's
// exception on the calling thread. Catch2 assertions are not thread-safe: rank functions check with
// HVD_ENFORCE or return results, and the test REQUIREs on the main thread.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms/barrier.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/transport/shm/shm_device.h"
#include "collectives/transport/tcp/tcp_device.h"
#include "collectives/transport/wait_policy.h"
#include "test/ranks/test_time.h"

namespace hvd::test {

// Connect and operation timeout of the ranks (scaled: test_time.h).
inline const std::chrono::milliseconds kTestTimeout = scaled(std::chrono::seconds(5));

// One rank marks that it is past a point (EndOf's destructor: also when it throws); another
// waits for that instead of sleeping for a guess: e.g. a peer stays connected until the other's
// receive has timed out. The wait is bounded (scaled), so a rank that never gets there cannot
// hang the test.
class Milestone {
 public:
  void reach() { reached_ = true; }
  void await(std::chrono::milliseconds limit = scaled(std::chrono::seconds(10))) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (!reached_ && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  // Reaches the milestone when the scope ends.
  struct EndOf {
    Milestone& milestone;
    ~EndOf() { milestone.reach(); }
  };

 private:
  std::atomic<bool> reached_ = false;
};

enum class Transport { Tcp, Shm };

inline const char* nameOf(Transport t) { return t == Transport::Tcp ? "tcp" : "shm"; }

struct RankOptions {
  std::string secret = "test-secret";
  collectives::WaitPolicy waits;  // spins apply to shm too
  std::chrono::milliseconds opTimeout = kTestTimeout;
  Transport transport = Transport::Tcp;
  std::size_t shmRingBytes = 64 * 1024;  // small, so tests wrap rings and fill them
  rendezvous::Store* store = nullptr;    // the ranks' rendezvous; null: a fresh InMemoryStore
};

inline RankOptions over(Transport transport) {
  RankOptions options;
  options.transport = transport;
  return options;
}

struct RankErrors {
  std::vector<std::exception_ptr> byRank;  // null where the rank returned
  std::exception_ptr first;                // the earliest, usually the root cause
  const std::exception_ptr& operator[](int rank) const { return byRank[rank]; }
};

// Runs fn on every rank and collects the ranks' exceptions, without a closing barrier: for
// tests where ranks fail or leave on purpose.
inline RankErrors runEachRank(int n, const std::function<void(collectives::Comm&)>& fn,
                              const RankOptions& options = {}) {
  rendezvous::InMemoryStore ownStore;
  rendezvous::Store& store = options.store ? *options.store : ownStore;
  RankErrors errors{std::vector<std::exception_ptr>(n), nullptr};
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        std::shared_ptr<collectives::Device> device;
        if (options.transport == Transport::Tcp)
          device =
              collectives::tcp::TcpDevice::create("127.0.0.1", options.secret, 0, options.waits);
        else
          device = collectives::shm::ShmDevice::create({options.shmRingBytes, options.waits.spins});
        auto comm = device->connectAll(r, n, store, kTestTimeout, options.opTimeout);
        fn(*comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        errors.byRank[r] = std::current_exception();
        if (!errors.first) errors.first = errors.byRank[r];
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// Every rank must succeed: rethrows the first rank's error. Ranks close only after all are done
// (a closing barrier), so no rank sees a peer vanish mid-operation.
inline void runRanks(int n, const std::function<void(collectives::Comm&)>& fn,
                     const RankOptions& options = {}) {
  auto errors = runEachRank(
      n,
      [&](collectives::Comm& comm) {
        fn(comm);
        collectives::barrier(comm);
      },
      options);
  if (errors.first) std::rethrow_exception(errors.first);
}

// Message i's bytes in the transport tests: a pattern that differs per message, per sender and
// per position.
inline std::vector<uint8_t> pattern(int sender, int i, std::size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (std::size_t k = 0; k < bytes; ++k) v[k] = static_cast<uint8_t>(sender * 131 + i * 7 + k);
  return v;
}

inline collectives::MutableBytes bytesOf(std::vector<uint8_t>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size()};
}

// The message of a rank's exception ("" for none).
inline std::string messageOf(std::exception_ptr e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "";
}

}  // namespace hvd::test
