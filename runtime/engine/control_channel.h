// Length-prefixed messages between the coordinator (rank 0) and the other ranks, on links of
// their own so that control traffic, which flows at any time, never interleaves with a
// collective's messages on the data links.
// Thread model: the engine thread owns it; wake() may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/transport/comm.h"

namespace hvd::runtime {

class ControlChannel {
 public:
  // `comm` may have size 1 (then there is nothing to send or receive, only wake-ups).
  // `listenTo` are the ranks this side receives from. `hostOfRank`: every rank's host, for
  // the message of a broken link; empty: unknown.
  ControlChannel(std::unique_ptr<collectives::Comm> comm, std::vector<int> listenTo,
                 std::vector<std::string> hostOfRank = {});

  int rank() const { return comm_->rank(); }
  // Queues the message and returns without waiting for the peer to read it: a message larger
  // than what the link buffers (a shared-memory control ring holds 64 KiB) would otherwise
  // wait for a peer that may itself be sending to this rank, or be in a collective this rank
  // has yet to join. What is queued moves on in send(), receive() and flush(). Throws IoError
  // naming the peer when a link broke, TimeoutError when a queued message has not left for
  // the op timeout.
  void send(int peer, std::string message);
  // Messages that have arrived, in order per peer, without blocking; moves queued sends on.
  // Throws as send() does.
  std::vector<std::pair<int, std::string>> receive();
  // receive() for an engine that is failing: a link that broke is skipped from then on and a
  // send that failed is dropped, so that one dead peer does not hide what the others sent.
  // Never throws.
  std::vector<std::pair<int, std::string>> receiveSurviving();
  // Waits until every queued message has left, or the deadline (then TimeoutError): before the
  // engine stops, so that its last messages (shutdown, a fatal error) reach the peers.
  void flush(collectives::Deadline deadline);
  // Returns when a message may have arrived, wake() was called since the last return, or at
  // the deadline.
  void waitForActivity(collectives::Deadline deadline);
  void wake();

 private:
  // Every message starts with a fixed frame holding its length and up to kInline bytes, so
  // the usual small message is one write and one read; a longer one sends the rest after it.
  static constexpr std::size_t kFrame = 512;
  static constexpr std::size_t kInline = kFrame - sizeof(uint64_t);
  // One message on the wire: the frame, then the payload's rest (`body`) when it is longer
  // than kInline. Frame and payload stay where the transport reads or writes them until both
  // requests complete.
  struct Framed {
    int peer = 0;
    std::array<std::byte, kFrame> frame{};
    std::string payload;
    collectives::Request header;
    collectives::Request body;
  };
  struct Inbound : Framed {
    bool inBody = false;
    bool broken = false;  // receiveSurviving() saw the link fail
  };
  struct Outbound : Framed {  // queued by send()
    collectives::Deadline deadline;
  };
  void postHeader(Inbound& in);
  // Moves the messages that have arrived from `in`'s peer to `out`; throws when the link broke.
  void readArrived(Inbound& in, std::vector<std::pair<int, std::string>>& out);
  // Drops the queued messages that have left; throws as send() does.
  void retireSends();
  // Waits for one queued message to leave and drops it from the queue, also when that throws.
  void finish(std::list<Outbound>::iterator it, collectives::Deadline deadline);
  [[noreturn]] void linkBroke(int peer, const std::exception& e) const;

  // The messages come before the communicator so that it is destroyed first: its transport
  // holds pointers into their frames and payloads.
  std::vector<Inbound> inbound_;
  std::list<Outbound> outbound_;  // a list: the transport holds pointers into each element
  std::list<Outbound> timedOut_;  // sends that timed out, kept while the transport may read them
  std::unique_ptr<collectives::Comm> comm_;
  std::vector<std::string> hostOfRank_;
  // Set by wake() before it interrupts the transport's wait. The transport's wake-up alone can
  // be lost: receive() polls the transport, which runs (and so swallows) a wake-up posted
  // between the engine's last look at its queue and its next wait.
  std::atomic<bool> wakePending_{false};
  // Single rank: wake-ups go through a condition variable instead of the transport.
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace hvd::runtime
