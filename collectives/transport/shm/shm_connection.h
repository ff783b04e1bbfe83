// A Connection to a peer on the same host through two shared-memory rings: the peer writes into
// the ring in this rank's segment and this rank into the one in the peer's. Messages are an
// 8-byte stamp, the 16-byte header {tag, length} TCP sends too, and the payload (layout in
// shm_connection.cc), matched in order against the posted receives (a mismatch is an
// InternalError). A send is done once its bytes are in the ring, so
// the caller may reuse its buffer before the peer has read it; a message larger than the ring
// streams through it in chunks, the reader copying out while the writer copies in.
// Thread model: every method runs on the thread that owns the Comm (inside the device's
// progress or the caller's isend/irecv); the rings' counters are the only shared state.
#pragma once

#include <deque>
#include <memory>

#include "collectives/transport/connection.h"
#include "collectives/transport/message.h"
#include "collectives/transport/shm/shm_segment.h"

namespace hvd::collectives::shm {

class ShmDevice;

// The two ends of one direction of a link.
struct RingView {
  RingHeader* ring;
  std::byte* data;
  std::size_t bytes;
  RingPages pages;  // prepared (shm_segment.h) at the first send or receive through it
  bool prepared = false;
};

class ShmConnection : public Connection, public RequestDescriber {
 public:
  // `in` carries the peer's bytes to this rank, `out` this rank's to the peer. The device must
  // outlive the connection.
  ShmConnection(ShmDevice& device, int selfRank, int size, int peerRank, int peerPid, RingView in,
                RingView out);
  ~ShmConnection() override;

  int peerRank() const override { return peerRank_; }
  std::string peerAddress() const override;
  Request isend(ConstBytes data, Tag tag) override;
  Request irecv(MutableBytes data, Tag tag) override;
  void close() override;
  std::string describe(const RequestState& request) const override;
  std::string peerState() const override;
  bool peerStopped() const override;

  // For ShmDevice. Moves what the rings allow; true when any byte moved or any request ended.
  bool pump();
  bool idle() const { return sends_.empty() && recvs_.empty(); }
  // Fails every pending request (and every later one) with `error`.
  void failAll(std::exception_ptr error);

 private:
  using Op = QueuedMessage;

  Request failed(const char* verb, Tag tag, std::size_t bytes) const;
  // Takes and maps the ring's pages at its first use; false, with the connection failed, where
  // /dev/shm has no room for them.
  bool prepare(RingView& ring, const char* verb);
  // The fast paths of isend and irecv, with their queue empty: move a whole message now (one
  // that fits in the ring's free space and one chunk; one already in the ring with the
  // expected tag and size). False when it cannot, having moved nothing.
  bool sendWhole(ConstBytes data, Tag tag);
  bool receiveWhole(MutableBytes data, Tag tag);
  // The ring's free bytes for a send that wants `wanted`: from the tail as last read while that
  // leaves enough, else read again.
  std::size_t freeSpace(std::size_t wanted);
  // Ends the message at `start` of `padded` bytes, whose bytes are in the ring: zeroes the next
  // stamp's slot, then stamps the message whole (stamp) or moves the head counter to its end
  // (the rest of a message that streamed), and rings the peer's doorbell.
  void endMessage(uint64_t start, std::size_t padded, bool stamp);
  // Moves inTail_ on by n bytes, makes it visible to the peer and rings its doorbell.
  void consume(std::size_t n);
  // Bytes of the next message are in the ring for the receive at the front of the queue.
  bool bytesWaiting() const;
  bool pumpSends();
  bool pumpReceives();
  // The peer closed its end: fail what can no longer complete (a receive whose bytes are not in
  // the ring, any send).
  bool failIfPeerClosed();
  std::exception_ptr error(const Op& op, const std::string& what) const;

  ShmDevice& device_;
  int selfRank_;
  int size_;
  int peerRank_;
  int peerPid_;
  RingView in_;
  RingView out_;
  uint64_t inTail_;  // our copy of in_.ring->tail (only we write it)
  // Where this rank's next byte goes in out_; ahead of out_.ring->head, which moves only for
  // messages that stream.
  uint64_t outHead_;
  // out_.ring->tail as last read: the space it leaves stays free (the tail only grows), so a
  // send reads the peer's counter, a cache line the peer writes, only when that space is short.
  uint64_t outTailSeen_;
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  MessageHeader incoming_{};
  std::exception_ptr broken_;
  bool closed_ = false;
};

}  // namespace hvd::collectives::shm
