// The elastic job's rounds, kept in the rendezvous store: hvdrun (the driver) publishes each
// membership of the job as a numbered round, mapping worker ids (fixed for a worker's life) to
// placements (rank, local rank, ... which change from round to round); a worker joins the first
// round published after the last one it ran in. Keys live under job/<jobId>/elastic/:
//   round/<n>/worker/<id>  the placement of worker <id> in round n (absent: not a member)
//   round/<n>/address/<host>  the address the workers on <host> listen on for their peers
//                          (absent: the one they reach hvdrun's store from)
//   round/<n>/published    written last, once round n is complete
//   round/<n>/joined       counter: members that joined round n
//   round/<n>/asking       counter: workers waiting for a round after n
//   current                the newest round's number
//   ready/<id>             the round after which worker <id> waits for a new one
//   joined/<id>            the round worker <id> joined last
// Rounds are never rewritten, so a reader never sees half of one. The counters let hvdrun watch a
// round with one read, whatever the number of workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "collectives/rendezvous/store.h"
#include "common/error.h"
#include "common/topology.h"

namespace hvd::rendezvous::elastic {

using Members = std::map<int, Topology>;                   // worker id -> placement
using HostAddresses = std::map<std::string, std::string>;  // host name -> address

// The driver's side. `addresses`: for hosts whose workers reach the store over loopback (hvdrun's
// own) while the round spans several hosts, the address their peers reach them on.
void publishRound(Store& store, const std::string& jobId, int64_t round, const Members& members,
                  const HostAddresses& addresses = {});
// How many workers joined round `round`, and how many wait for a round after it (each counted
// once, however often its join is retried).
int64_t joinedCount(Store& store, const std::string& jobId, int64_t round);
int64_t askingCount(Store& store, const std::string& jobId, int64_t round);
// The round worker `id` waits to follow (ready/<id>); nullopt before its first init.
std::optional<int64_t> waitingAfter(Store& store, const std::string& jobId, int id);
// The round worker `id` joined last (joined/<id>); nullopt before its first join.
std::optional<int64_t> joinedRound(Store& store, const std::string& jobId, int id);

// The worker's side.
struct Joined {
  int64_t round = 0;
  Topology placement;
  std::string address;  // round/<n>/address/<host> for the worker's host, else empty
};
// Announces that worker `id` wants a round after the one it joined last, waits up to `timeout`
// for it and records the join. Throws TimeoutError naming the round and the timeout, and
// InvalidArgument when the newest round leaves this worker out (hvdrun removed it).
Joined joinNextRound(Store& store, const std::string& jobId, int id,
                     std::chrono::milliseconds timeout);
// The newest round's number, or -1 before the first.
int64_t currentRound(Store& store, const std::string& jobId);

// Thrown while a round's workers connect, when hvdrun has given that round up.
class RoundAbandoned : public Error {
 public:
  using Error::Error;
};

// The store a worker of round `round` connects through: waits run in slices of at most a
// second and end with RoundAbandoned as soon as hvdrun has published a newer round (a member
// died before the round formed, so the round never will).
class RoundStore : public Store {
 public:
  RoundStore(Store& inner, std::string jobId, int64_t round)
      : inner_(inner), jobId_(std::move(jobId)), round_(round) {}
  void set(const std::string& key, const Bytes& value) override { inner_.set(key, value); }
  std::optional<Bytes> get(const std::string& key) override { return inner_.get(key); }
  std::vector<std::optional<Bytes>> multiGet(const std::vector<std::string>& keys) override {
    return inner_.multiGet(keys);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  void checkAbandoned() override;

 private:
  Store& inner_;
  std::string jobId_;
  int64_t round_;
};

// A placement as one line of text, and back; decode throws IoError for a malformed value.
std::string encodePlacement(const Topology& t);
Topology decodePlacement(const std::string& text);

}  // namespace hvd::rendezvous::elastic
