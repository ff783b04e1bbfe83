// Scopes every key of an inner store under "prefix/". Keys in timeout errors are reported
// without the prefix, so callers can map them back to ranks.
#pragma once

#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

class PrefixStore : public Store {
 public:
  // `inner` must outlive this store.
  PrefixStore(std::string prefix, Store& inner) : prefix_(std::move(prefix) + "/"), inner_(inner) {}

  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> get(const std::string& key) override;
  std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void checkAbandoned() override { inner_.checkAbandoned(); }

 private:
  std::string prefix_;
  Store& inner_;
};

}  // namespace hvd::rendezvous
