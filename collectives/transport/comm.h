// A communicator: this rank, the world size, one Connection per peer, and the timeout every
// operation on it uses. Algorithms see only this (collectives/algorithms never include a
// transport implementation).
// Thread model: one thread uses a Comm at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport/connection.h"
#include "common/error.h"

namespace hvd::collectives {

class Comm {
 public:
  // connections[r] is the link to rank r; connections[rank] is null. `keepAlive` holds whatever
  // the connections depend on (the transport's device).
  Comm(int rank, int size, std::vector<std::shared_ptr<Connection>> connections,
       std::chrono::milliseconds timeout, std::shared_ptr<void> keepAlive);
  ~Comm();

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  Deadline deadline() const { return Clock::now() + timeout_; }
  Connection& peer(int r);

  // Each collective takes the next sequence number; both sides agree because collectives run in
  // the same order on every rank. Tags built from it keep operations' messages apart.
  uint64_t nextSequence() { return sequence_++; }
  std::string describe() const;  // "rank 1/4"
  // A reusable scratch buffer of at least `bytes` (contents undefined), valid until the next
  // call; saves collectives an allocation per operation.
  std::byte* scratch(std::size_t bytes);

 private:
  int rank_;
  int size_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<void> keepAlive_;
  uint64_t sequence_ = 0;
  std::unique_ptr<std::byte[]> scratch_;
  std::size_t scratchBytes_ = 0;
};

}  // namespace hvd::collectives
