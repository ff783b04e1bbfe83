// Runs N Runtimes (engine and all) as threads in this process over loopback, sharing one
// InMemoryStore. Each rank's function returns a string (empty for success, or what went
// wrong), so the test can REQUIRE on the main thread (Catch2 is not thread-safe).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collectives/rendezvous/in_memory_store.h"
#include "runtime/runtime.h"

namespace hvd::test {

using RankFn = std::function<std::string(runtime::Runtime&, int rank)>;

inline runtime::Config runtimeConfig(int rank, int size,
                                     std::map<std::string, std::string> extra = {}) {
  extra["HVD_RANK"] = std::to_string(rank);
  extra["HVD_SIZE"] = std::to_string(size);
  extra["HVD_RENDEZVOUS_ADDR"] = "127.0.0.1";
  extra["HVD_RENDEZVOUS_PORT"] = "1";
  extra["HVD_SECRET"] = "s";
  if (!extra.count("HVD_OP_TIMEOUT")) extra["HVD_OP_TIMEOUT"] = "10";
  if (!extra.count("HVD_START_TIMEOUT")) extra["HVD_START_TIMEOUT"] = "10";
  return runtime::Config::fromParams(params::ParamValues::fromMap(extra));
}

// Parameters that place all n ranks on one host and pick their transport ("tcp" or "shm").
inline std::map<std::string, std::string> oneHost(int n, const std::string& transport,
                                                  std::map<std::string, std::string> extra = {}) {
  extra["HVD_LOCAL_SIZE"] = std::to_string(n);
  extra["HVD_TRANSPORT"] = transport;
  return extra;
}

using ParamsFor = std::function<std::map<std::string, std::string>(int rank)>;

// Returns each rank's outcome; rank r runs with the parameters paramsFor(r). With `shutdown`,
// every rank shuts down collectively at the end.
inline std::vector<std::string> runRuntimesWith(int n, const RankFn& fn, const ParamsFor& paramsFor,
                                                bool shutdown = true) {
  rendezvous::InMemoryStore store;
  std::vector<std::string> outcome(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto rt = runtime::Runtime::create(runtimeConfig(r, n, paramsFor(r)), store);
        outcome[r] = fn(*rt, r);
        if (shutdown) rt->shutdown();
      } catch (const std::exception& e) {
        outcome[r] = std::string("exception: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  return outcome;
}

// Every rank with the same extra parameters.
inline std::vector<std::string> runRuntimes(int n, const RankFn& fn,
                                            std::map<std::string, std::string> extra = {},
                                            bool shutdown = true) {
  return runRuntimesWith(
      n, fn, [&](int) { return extra; }, shutdown);
}

// Catches the error an expression throws and returns its message ("" when it does not throw).
template <typename Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace hvd::test
