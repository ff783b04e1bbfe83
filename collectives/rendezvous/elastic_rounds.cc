#include "collectives/rendezvous/elastic_rounds.h"

#include <sstream>

#include "common/error.h"

namespace hvd::rendezvous::elastic {
namespace {

std::string key(const std::string& jobId, const std::string& rest) {
  return "job/" + jobId + "/elastic/" + rest;
}

std::string roundKey(const std::string& jobId, int64_t round, const std::string& rest) {
  return key(jobId, detail::concat("round/", round, "/", rest));
}

Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string textOf(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::optional<int64_t> readNumber(Store& store, const std::string& k) {
  auto value = store.get(k);
  if (!value) return std::nullopt;
  try {
    return std::stoll(textOf(*value));
  } catch (const std::exception&) {
    throw IoError("rendezvous: malformed number '" + textOf(*value) + "' at " + k);
  }
}

}  // namespace

std::string encodePlacement(const Topology& t) {
  return detail::concat(t.rank, " ", t.size, " ", t.localRank, " ", t.localSize, " ", t.crossRank,
                        " ", t.crossSize, " ", t.hostname);
}

Topology decodePlacement(const std::string& text) {
  std::istringstream in(text);
  Topology t;
  in >> t.rank >> t.size >> t.localRank >> t.localSize >> t.crossRank >> t.crossSize >> t.hostname;
  if (!in || t.hostname.empty() || t.rank < 0 || t.rank >= t.size)
    throw IoError("rendezvous: malformed elastic placement '" + text + "'");
  return t;
}

void publishRound(Store& store, const std::string& jobId, int64_t round, const Members& members,
                  const HostAddresses& addresses) {
  for (const auto& [id, placement] : members)
    store.set(roundKey(jobId, round, "worker/" + std::to_string(id)),
              bytesOf(encodePlacement(placement)));
  for (const auto& [host, address] : addresses)
    store.set(roundKey(jobId, round, "address/" + host), bytesOf(address));
  store.set(key(jobId, "current"), bytesOf(std::to_string(round)));
  store.set(roundKey(jobId, round, "published"), bytesOf(std::to_string(members.size())));
}

std::optional<int64_t> waitingAfter(Store& store, const std::string& jobId, int id) {
  return readNumber(store, key(jobId, "ready/" + std::to_string(id)));
}

int64_t joinedCount(Store& store, const std::string& jobId, int64_t round) {
  return store.add(roundKey(jobId, round, "joined"), 0);
}

int64_t askingCount(Store& store, const std::string& jobId, int64_t round) {
  return store.add(roundKey(jobId, round, "asking"), 0);
}

std::optional<int64_t> joinedRound(Store& store, const std::string& jobId, int id) {
  return readNumber(store, key(jobId, "joined/" + std::to_string(id)));
}

int64_t currentRound(Store& store, const std::string& jobId) {
  return readNumber(store, key(jobId, "current")).value_or(-1);
}

Joined joinNextRound(Store& store, const std::string& jobId, int id,
                     std::chrono::milliseconds timeout) {
  const std::string worker = std::to_string(id);
  int64_t last = joinedRound(store, jobId, id).value_or(-1);
  if (waitingAfter(store, jobId, id) != last) {  // a retried join is not counted again
    store.set(key(jobId, "ready/" + worker), bytesOf(std::to_string(last)));
    store.add(roundKey(jobId, last, "asking"), 1);
  }
  try {
    store.wait({roundKey(jobId, last + 1, "published")}, timeout);
  } catch (const TimeoutError&) {
    throw TimeoutError(detail::concat(
        "elastic worker ", id, ": hvdrun formed no new round after round ", last, " within ",
        timeout.count() / 1000, " s (HVD_ELASTIC_TIMEOUT; fewer slots than --min-np?)"));
  }
  // Rounds may have been published since: join the newest, which every waiting peer also reads.
  int64_t round = currentRound(store, jobId);
  auto placement = store.get(roundKey(jobId, round, "worker/" + worker));
  if (!placement)
    throw InvalidArgument(detail::concat("elastic worker ", id, ": round ", round,
                                         " leaves this worker out (hvdrun removed its host)"));
  Joined joined{round, decodePlacement(textOf(*placement)), {}};
  if (auto address = store.get(roundKey(jobId, round, "address/" + joined.placement.hostname)))
    joined.address = textOf(*address);
  store.set(key(jobId, "joined/" + worker), bytesOf(std::to_string(round)));
  store.add(roundKey(jobId, round, "joined"), 1);
  return joined;
}

void RoundStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto slice = std::min(left, std::chrono::milliseconds(1000));
    try {
      inner_.wait(keys, std::max(slice, std::chrono::milliseconds(1)));
      return;
    } catch (const StoreTimeout& e) {
      if (slice >= left) {
        throw StoreTimeout(describeTimeout(timeout, e.missingKeys()), e.missingKeys());
      }
    }
    checkAbandoned();
  }
}

void RoundStore::checkAbandoned() {
  int64_t newest = currentRound(inner_, jobId_);
  if (newest > round_)
    throw RoundAbandoned(
        detail::concat("elastic: round ", round_, " was given up for round ", newest,
                       " while its workers connected (a member left before it formed)"));
}

}  // namespace hvd::rendezvous::elastic
