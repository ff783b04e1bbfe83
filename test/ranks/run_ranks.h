// Runs N ranks as threads in this process, each with its own TCP device on 127.0.0.1 and one
// shared InMemoryStore (Gloo's BaseTest::spawn). The first exception of any rank is rethrown on
// the calling thread. Catch2 assertions are not thread-safe: rank functions check with
// HVD_ENFORCE or return results, and the test REQUIREs on the main thread.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/algorithms/barrier.h"
#include "collectives/rendezvous/in_memory_store.h"
#include "collectives/transport/tcp/tcp_device.h"

namespace hvd::test {

inline constexpr std::chrono::seconds kTestTimeout{5};

inline void runRanks(int n, const std::function<void(collectives::Comm&)>& fn,
                     const std::string& secret = "test-secret") {
  rendezvous::InMemoryStore store;
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto device = collectives::tcp::TcpDevice::create("127.0.0.1", secret);
        auto comm = device->connectAll(r, n, store, kTestTimeout, kTestTimeout);
        fn(*comm);
        // Close only after every rank is done, so no rank sees a peer vanish mid-operation.
        collectives::barrier(*comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace hvd::test
