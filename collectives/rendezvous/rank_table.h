// Every rank's value through the store in O(N) requests: a TCP device's address table, the shm
// device's segment names. Each rank sets <prefix><rank>; rank 0 waits for all N, reads them with
// one multiGet and publishes them as one value, <prefix>table; every other rank waits for that
// and reads it. That is about 3N requests to the store in all (and the server's waiters are
// rank 0 on N keys and N-1 ranks on one), where each rank reading every rank's key was N²
// requests: a million round trips to the one rendezvous server at 1,000 ranks.
// Thread-safety: as the store's; one call per rank and prefix.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "collectives/rendezvous/store.h"

namespace hvd::rendezvous {

// A gather that timed out. missingRanks(): the ranks that had not published, in order; when
// every rank had, rank 0 alone (it publishes the table, and stopped or gave up first).
class RankTableTimeout : public TimeoutError {
 public:
  RankTableTimeout(const std::string& message, std::vector<int> missing)
      : TimeoutError(message), missing_(std::move(missing)) {}
  const std::vector<int>& missingRanks() const { return missing_; }

 private:
  std::vector<int> missing_;
};

// Publishes `value` as rank `rank` of `size` and returns every rank's value, in rank order,
// once all have published; blocks up to `timeout`. Throws RankTableTimeout, IoError for a
// malformed table, and whatever the store throws (IoError, an elastic round's RoundAbandoned).
std::vector<Bytes> gatherRankTable(Store& store, const std::string& prefix, int rank, int size,
                                   const Bytes& value, std::chrono::milliseconds timeout);

// Rank 0's value alone, for links that form a star around rank 0 (every other rank needs rank 0's
// address, rank 0 nobody's): rank 0 sets <prefix>0 and returns `value`; every other rank waits
// for that key and returns it (`value` unused). One request per rank, and no rank waits for
// the slowest to publish. Throws RankTableTimeout naming rank 0, and what the store throws.
Bytes shareRankZeroValue(Store& store, const std::string& prefix, int rank, const Bytes& value,
                         std::chrono::milliseconds timeout);

// The table's encoding, for tests: a 4-byte big-endian count, then per value a 4-byte
// big-endian length and the bytes. decode throws IoError naming `key` when malformed.
Bytes encodeRankTable(const std::vector<Bytes>& values);
std::vector<Bytes> decodeRankTable(const Bytes& table, const std::string& key);

}  // namespace hvd::rendezvous
