#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

Bytes Store::waitGet(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  auto value = get(key);
  HVD_ENFORCE(value.has_value(), "key ", key, " vanished after wait");
  return *value;
}

std::vector<std::optional<Bytes>> Store::multiGet(const std::vector<std::string>& keys) {
  std::vector<std::optional<Bytes>> values;
  values.reserve(keys.size());
  for (const auto& k : keys) values.push_back(get(k));
  return values;
}

std::string describeTimeout(std::chrono::milliseconds timeout,
                            const std::vector<std::string>& missing) {
  std::string out = detail::concat("rendezvous: timed out after ", timeout.count(),
                                   " ms waiting for ", missing.size(), " key(s): ");
  for (std::size_t i = 0; i < missing.size(); ++i) out += (i ? ", " : "") + missing[i];
  return out;
}

}  // namespace hvd::rendezvous
