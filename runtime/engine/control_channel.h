// Length-prefixed messages between the coordinator (rank 0) and the other ranks, on links of
// their own so that control traffic, which flows at any time, never interleaves with a
// collective's messages on the data links.
// Thread model: the engine thread owns it; wake() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::runtime {

class ControlChannel {
 public:
  // `comm` may have size 1 (then there is nothing to send or receive, only wake-ups).
  // `listenTo` are the ranks this side receives from.
  ControlChannel(std::unique_ptr<collectives::Comm> comm, std::vector<int> listenTo);

  int rank() const { return comm_->rank(); }
  // Returns once the message has left (into the socket buffer): the transport starts a queued
  // send only from the previous one's completion handler, and the engine may go into a long
  // collective on the data links next. Throws IoError naming the peer, TimeoutError when the
  // peer does not read for the op timeout.
  void send(int peer, const std::string& message);
  // Messages that have arrived, in order per peer, without blocking. Throws IoError naming the
  // peer when a link broke (the peer's process exited or was killed).
  std::vector<std::pair<int, std::string>> receive();
  // Returns when a message may have arrived, wake() was called since the last return, or at
  // the deadline.
  void waitForActivity(collectives::Deadline deadline);
  void wake();
 private:
  // Every message starts with a fixed frame holding its length and up to kInline bytes, so
  // the usual small message is one write and one read; a longer one sends the rest after it.
  static constexpr std::size_t kFrame = 512;
  static constexpr std::size_t kInline = kFrame - sizeof(uint64_t);
  struct Inbound {
    int peer = 0;
    std::array<std::byte, kFrame> frame{};
    std::string payload;
    collectives::Request header;
    collectives::Request body;
    bool inBody = false;
  };
  void postHeader(Inbound& in);
  [[noreturn]] void linkBroke(int peer, const std::exception& e) const;

  std::unique_ptr<collectives::Comm> comm_;
  std::vector<Inbound> inbound_;
  // Set by wake() before it interrupts the transport's wait. The transport's wake-up alone can
  // be lost: receive() polls the transport, which runs (and so swallows) a wake-up posted
  // between the engine's last look at its queue and its next wait.
  std::atomic<bool> wakePending_{false};
  // Single rank: wake-ups go through a condition variable instead of the transport.
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace hvd::runtime
