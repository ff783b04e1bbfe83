#include "collectives/rendezvous/key_value_table.h"

#include <string>

namespace hvd::rendezvous {

std::optional<Bytes> KeyValueTable::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::optional<Bytes>> KeyValueTable::multiGet(
    const std::vector<std::string>& keys) const {
  std::vector<std::optional<Bytes>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(get(k));
  return out;
}

// Counters are stored as decimal text so `get` on a counter is readable.
int64_t KeyValueTable::add(const std::string& key, int64_t delta) {
  int64_t current = 0;
  if (auto it = values_.find(key); it != values_.end()) {
    std::string text(it->second.begin(), it->second.end());
    try {
      current = std::stoll(text);
    } catch (const std::exception&) {
      throw InvalidArgument("rendezvous: add on key '" + key + "' which holds a non-counter value");
    }
  }
  current += delta;
  std::string text = std::to_string(current);
  values_[key] = Bytes(text.begin(), text.end());
  return current;
}

std::vector<std::string> KeyValueTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys)
    if (!values_.count(k)) out.push_back(k);
  return out;
}

}  // namespace hvd::rendezvous
