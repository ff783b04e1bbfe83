// A Store inside one process, for ranks run as threads (tests, benchmarks).
#pragma once

#include <condition_variable>
#include <mutex>

#include "collectives/rendezvous/key_value_table.h"
#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

class InMemoryStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> get(const std::string& key) override;
  std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::mutex mutex_;  // guards table_
  std::condition_variable changed_;
  KeyValueTable table_;
};

}  // namespace hvd::rendezvous
