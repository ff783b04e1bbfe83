// The rendezvous key-value store interface, after Gloo's rendezvous::Store, with timeouts
// required on every wait. Implementations: InMemoryStore (threads in one process),
// TcpStoreClient (the launcher's server), PrefixStore (scoping).
// Thread-safety: implementations are safe to call from several threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace hvd::rendezvous {

using Bytes = std::vector<uint8_t>;

// A wait that timed out; missingKeys() lists the keys that were still absent.
class StoreTimeout : public TimeoutError {
 public:
  StoreTimeout(const std::string& message, std::vector<std::string> missing)
      : TimeoutError(message), missing_(std::move(missing)) {}
  const std::vector<std::string>& missingKeys() const { return missing_; }

 private:
  std::vector<std::string> missing_;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // The value, or nullopt when the key is absent. Never blocks on other ranks.
  virtual std::optional<Bytes> get(const std::string& key) = 0;
  // get() of every key, in order, as one request where the store has a network between it and
  // the data (TcpStoreClient): reading N ranks' keys costs one round trip, not N. This
  // default calls get() per key.
  virtual std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys);
  // Blocks until every key is present; throws StoreTimeout listing the absent ones.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Atomically adds delta to the counter at key (absent counts as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Throws when what this store serves was abandoned (an elastic job's superseded round). Long
  // waits outside the store (accepting peers) call it between slices; the store's own waits
  // check it themselves.
  virtual void checkAbandoned() {}

  Bytes waitGet(const std::string& key, std::chrono::milliseconds timeout);
};

// Formats the message of a StoreTimeout.
std::string describeTimeout(std::chrono::milliseconds timeout,
                            const std::vector<std::string>& missing);

}  // namespace hvd::rendezvous
