#include "collectives/rendezvous/in_memory_store.h"

namespace hvd::rendezvous {

void InMemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.set(key, value);
  }
  changed_.notify_all();
}

std::optional<Bytes> InMemoryStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.get(key);
}

std::vector<std::optional<Bytes>> InMemoryStore::multiGet(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.multiGet(keys);
}

void InMemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool ok = changed_.wait_for(lock, timeout, [&] { return table_.missing(keys).empty(); });
  if (!ok) {
    auto missing = table_.missing(keys);
    throw StoreTimeout(describeTimeout(timeout, missing), missing);
  }
}

int64_t InMemoryStore::add(const std::string& key, int64_t delta) {
  int64_t value;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    value = table_.add(key, delta);
  }
  changed_.notify_all();
  return value;
}

}  // namespace hvd::rendezvous
