// The data of a rendezvous store without any waiting or I/O: values, counters, and which of a set
// of keys are still missing. Shared by InMemoryStore and the launcher's rendezvous server.
// Not thread-safe: the owner serialises access.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

class KeyValueTable {
 public:
  void set(const std::string& key, Bytes value) { values_[key] = std::move(value); }
  std::optional<Bytes> get(const std::string& key) const;
  std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys) const;
  int64_t add(const std::string& key, int64_t delta);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

 private:
  std::map<std::string, Bytes> values_;
};

}  // namespace hvd::rendezvous
