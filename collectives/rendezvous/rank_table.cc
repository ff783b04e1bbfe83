#include "collectives/rendezvous/rank_table.h"

#include "common/format.h"

namespace hvd::rendezvous {
namespace {

std::string keyOf(const std::string& prefix, int rank) { return prefix + std::to_string(rank); }

std::vector<std::string> rankKeys(const std::string& prefix, int size) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) keys.push_back(keyOf(prefix, r));
  return keys;
}

void putU32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<int> ranksOf(const std::vector<std::string>& missingKeys, const std::string& prefix) {
  std::vector<int> ranks;
  for (const auto& k : missingKeys) ranks.push_back(std::stoi(k.substr(prefix.size())));
  return ranks;
}

[[noreturn]] void throwTimeout(std::chrono::milliseconds timeout, const std::string& prefix,
                               std::vector<int> missing) {
  std::string message =
      detail::concat("rendezvous: timed out after ", timeout.count(), " ms gathering ", prefix,
                     "<rank> of ranks ", rankSet(missing));
  throw RankTableTimeout(message, std::move(missing));
}

// Rank 0: every rank's key, read at once and published as the table.
std::vector<Bytes> gatherAndPublish(Store& store, const std::string& prefix, int size,
                                    std::chrono::milliseconds timeout) {
  auto keys = rankKeys(prefix, size);
  try {
    store.wait(keys, timeout);
  } catch (const StoreTimeout& e) {
    throwTimeout(timeout, prefix, ranksOf(e.missingKeys(), prefix));
  }
  std::vector<Bytes> values;
  values.reserve(keys.size());
  auto read = store.multiGet(keys);
  for (std::size_t r = 0; r < read.size(); ++r) {
    HVD_ENFORCE(read[r].has_value(), "rendezvous: key ", keys[r], " vanished after the wait");
    values.push_back(std::move(*read[r]));
  }
  store.set(prefix + "table", encodeRankTable(values));
  return values;
}

// Any other rank: the table rank 0 publishes. On a timeout, one more request finds the ranks
// that never published, so the error names them as before the table existed.
std::vector<Bytes> readTable(Store& store, const std::string& prefix, int size,
                             std::chrono::milliseconds timeout) {
  std::string key = prefix + "table";
  try {
    store.wait({key}, timeout);
  } catch (const StoreTimeout&) {
    std::vector<int> missing{0};
    try {
      store.wait(rankKeys(prefix, size), std::chrono::milliseconds(0));
    } catch (const StoreTimeout& e) {
      missing = ranksOf(e.missingKeys(), prefix);
    }
    throwTimeout(timeout, prefix, std::move(missing));
  }
  auto table = store.get(key);
  HVD_ENFORCE(table.has_value(), "rendezvous: key ", key, " vanished after the wait");
  auto values = decodeRankTable(*table, key);
  if (values.size() != static_cast<std::size_t>(size))
    throw IoError(detail::concat("rendezvous: ", key, " holds ", values.size(),
                                 " values for a job of ", size, " ranks"));
  return values;
}

}  // namespace

std::vector<Bytes> gatherRankTable(Store& store, const std::string& prefix, int rank, int size,
                                   const Bytes& value, std::chrono::milliseconds timeout) {
  HVD_ENFORCE(rank >= 0 && rank < size, "rank ", rank, " outside [0, ", size, ")");
  store.set(keyOf(prefix, rank), value);
  if (rank == 0) return gatherAndPublish(store, prefix, size, timeout);
  return readTable(store, prefix, size, timeout);
}

Bytes shareRankZeroValue(Store& store, const std::string& prefix, int rank, const Bytes& value,
                         std::chrono::milliseconds timeout) {
  HVD_ENFORCE(rank >= 0, "rank ", rank, " is negative");
  std::string key = keyOf(prefix, 0);
  if (rank == 0) {
    store.set(key, value);
    return value;
  }
  try {
    store.wait({key}, timeout);
  } catch (const StoreTimeout&) {
    throwTimeout(timeout, prefix, {0});
  }
  auto read = store.get(key);
  HVD_ENFORCE(read.has_value(), "rendezvous: key ", key, " vanished after the wait");
  return std::move(*read);
}

Bytes encodeRankTable(const std::vector<Bytes>& values) {
  Bytes out;
  std::size_t bytes = 4;
  for (const auto& v : values) bytes += 4 + v.size();
  out.reserve(bytes);
  putU32(out, static_cast<uint32_t>(values.size()));
  for (const auto& v : values) {
    putU32(out, static_cast<uint32_t>(v.size()));
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<Bytes> decodeRankTable(const Bytes& table, const std::string& key) {
  std::size_t at = 0;
  auto u32 = [&](const char* what) {
    if (table.size() - at < 4)
      throw IoError(detail::concat("rendezvous: ", key, " is malformed: ", table.size(),
                                   " bytes end inside ", what, " at byte ", at));
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | table[at++];
    return v;
  };
  uint32_t count = u32("the count");
  std::vector<Bytes> values;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t length = u32("a length");
    if (table.size() - at < length)
      throw IoError(detail::concat("rendezvous: ", key, " is malformed: value ", i, " of ", count,
                                   " announces ", length, " bytes, ", table.size() - at,
                                   " are left"));
    values.emplace_back(table.begin() + static_cast<std::ptrdiff_t>(at),
                        table.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  if (at != table.size())
    throw IoError(detail::concat("rendezvous: ", key, " is malformed: ", table.size() - at,
                                 " bytes after its ", count, " values"));
  return values;
}

}  // namespace hvd::rendezvous
