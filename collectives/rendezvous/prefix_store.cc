#include "collectives/rendezvous/prefix_store.h"

namespace hvd::rendezvous {

void PrefixStore::set(const std::string& key, const Bytes& value) {
  inner_.set(prefix_ + key, value);
}

std::optional<Bytes> PrefixStore::get(const std::string& key) { return inner_.get(prefix_ + key); }

std::vector<std::optional<Bytes>> PrefixStore::multiGet(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  return inner_.multiGet(full);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  try {
    inner_.wait(full, timeout);
  } catch (const StoreTimeout& e) {
    std::vector<std::string> missing;
    for (const auto& k : e.missingKeys())
      missing.push_back(k.rfind(prefix_, 0) == 0 ? k.substr(prefix_.size()) : k);
    throw StoreTimeout(describeTimeout(timeout, missing), missing);
  }
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return inner_.add(prefix_ + key, delta);
}

}  // namespace hvd::rendezvous
