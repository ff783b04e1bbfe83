#include "collectives/transport/shm/shm_connection.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>

#include "collectives/transport/shm/shm_device.h"
#include "common/error.h"

namespace hvd::collectives::shm {
namespace {

// A message in a ring starts at a multiple of 8 with an 8-byte stamp, then the MessageHeader,
// then the payload, padded to a multiple of 8. The stamp, written last, is the message's
// position with kValid (and kWhole when every byte of it was written before the stamp): the
// reader polls the stamp where the next message will start, so a small message and the news of
// it share cache lines, and the head counter, a line of its own, moves only for messages that
// stream through the ring in pieces. A sender zeroes the stamp slot after each message it ends
// before stamping it, so the reader never takes payload bytes of a message one lap earlier for a
// stamp; an old stamp names another position.
constexpr std::size_t kStampBytes = sizeof(uint64_t);
constexpr std::size_t kHeaderBytes = kStampBytes + sizeof(MessageHeader);
constexpr uint64_t kValid = 1;
constexpr uint64_t kWhole = 2;
constexpr uint64_t kStampFlags = 7;
// A writer publishes its progress at least every kChunk bytes, so the reader copies out the
// start of a large message while the writer is still copying in the rest.
constexpr std::size_t kChunk = 128 * 1024;

std::size_t paddedBytes(std::size_t length) {
  return (kHeaderBytes + length + kStampBytes - 1) & ~(kStampBytes - 1);
}

// Where a ring position falls in the ring's bytes: a mask for the power-of-two sizes rings
// have by default, where a 64-bit division would cost each small message's copies tens of
// nanoseconds.
std::size_t ringOffset(const RingView& ring, uint64_t at) {
  std::size_t size = ring.bytes;
  return (size & (size - 1)) == 0 ? static_cast<std::size_t>(at & (size - 1))
                                  : static_cast<std::size_t>(at % size);
}

// The stamp slot at a message's position (a multiple of 8; ring sizes are multiples of 64, so
// the slot never wraps).
std::atomic_ref<uint64_t> stampAt(const RingView& ring, uint64_t at) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(ring.data + ringOffset(ring, at)));
}

// Copies n bytes into the ring at stream position `at`, wrapping at its end.
void copyIn(const RingView& ring, uint64_t at, const std::byte* from, std::size_t n) {
  std::size_t offset = ringOffset(ring, at);
  std::size_t first = std::min(n, ring.bytes - offset);
  std::memcpy(ring.data + offset, from, first);
  if (n > first) std::memcpy(ring.data, from + first, n - first);
}

void copyOut(const RingView& ring, uint64_t at, std::byte* to, std::size_t n) {
  std::size_t offset = ringOffset(ring, at);
  std::size_t first = std::min(n, ring.bytes - offset);
  std::memcpy(to, ring.data + offset, first);
  if (n > first) std::memcpy(to + first, ring.data, n - first);
}

// Calls move(piece, length, offset) for the parts of a message's bytes [done, done + n) that
// are its header (at `header`) or its payload; `offset` is where the part starts from `done`.
// The stamp and the padding are nobody's bytes.
template <typename Move>
void forPieces(std::byte* header, std::byte* payload, std::size_t length, std::size_t done,
               std::size_t n, Move&& move) {
  auto overlap = [&](std::size_t begin, std::size_t end, std::byte* base) {
    std::size_t from = std::max(begin, done), to = std::min(end, done + n);
    if (from < to) move(base + (from - begin), to - from, from - done);
  };
  overlap(kStampBytes, kHeaderBytes, header);
  overlap(kHeaderBytes, kHeaderBytes + length, payload);
}

// Payload bytes a request has moved once `done` of its message's bytes have.
std::size_t payloadMoved(std::size_t done, std::size_t length) {
  return done <= kHeaderBytes ? 0 : std::min(done - kHeaderBytes, length);
}

}  // namespace

ShmConnection::ShmConnection(ShmDevice& device, int selfRank, int size, int peerRank, int peerPid,
                             RingView in, RingView out)
    : device_(device),
      selfRank_(selfRank),
      size_(size),
      peerRank_(peerRank),
      peerPid_(peerPid),
      in_(in),
      out_(out),
      inTail_(in.ring->tail.load(std::memory_order_relaxed)),
      outHead_(out.ring->head.load(std::memory_order_relaxed)),
      outTailSeen_(out.ring->tail.load(std::memory_order_relaxed)) {}

ShmConnection::~ShmConnection() { device_.forget(this); }

std::string ShmConnection::peerAddress() const { return detail::concat("shm, pid ", peerPid_); }

std::string ShmConnection::describe(const RequestState& request) const {
  return describeRequest(selfRank_, size_, peerRank_, peerAddress(), request);
}

Request ShmConnection::failed(const char* verb, Tag tag, std::size_t bytes) const {
  auto state = newRequestState(verb, tag, bytes, this);
  state->done = true;
  state->error = broken_ ? broken_ : error(Op{{}, nullptr, state}, "connection closed");
  return Request(state, &device_);
}

std::exception_ptr ShmConnection::error(const Op& op, const std::string& what) const {
  return std::make_exception_ptr(IoError(op.state->description() + ": " + what));
}

bool ShmConnection::prepare(RingView& ring, const char* verb) {
  if (ring.prepared) return true;
  try {
    prepareRing(ring.pages, ring.bytes,
                detail::concat("rank ", selfRank_, "/", size_, ": ", verb, " rank ", peerRank_,
                               " (", peerAddress(), ")"));
    ring.prepared = true;
    return true;
  } catch (const IoError&) {
    failAll(std::current_exception());
    return false;
  }
}

Request ShmConnection::isend(ConstBytes data, Tag tag) {
  if (broken_ || closed_ || !prepare(out_, "send to")) return failed("send to", tag, data.size());
  // With nothing queued ahead, a message that fits in the ring's free space is written now and
  // needs no request: a tiny collective would otherwise spend most of its time on bookkeeping.
  if (sends_.empty() && sendWhole(data, tag)) return Request();
  auto state = newRequestState("send to", tag, data.size(), this);
  sends_.push_back(Op{{tag, data.size()}, const_cast<std::byte*>(data.data()), state});
  // A message that fits goes out now: the peer may be polling for it.
  if (sends_.size() == 1) pumpSends();
  return Request(state, &device_);
}

Request ShmConnection::irecv(MutableBytes data, Tag tag) {
  if (broken_ || closed_ || !prepare(in_, "recv from"))
    return failed("recv from", tag, data.size());
  if (recvs_.empty() && receiveWhole(data, tag)) return Request();
  auto state = newRequestState("recv from", tag, data.size(), this);
  recvs_.push_back(Op{{tag, data.size()}, data.data(), state});
  return Request(state, &device_);
}

bool ShmConnection::sendWhole(ConstBytes data, Tag tag) {
  std::size_t padded = paddedBytes(data.size());
  if (padded > kChunk || freeSpace(padded + kStampBytes) < padded + kStampBytes) return false;
  MessageHeader header{tag, data.size()};
  // The payload past the stamp's cache line first, then that line's bytes together, just before
  // the stamp: a reader polling the line takes it from this core once, not between stores.
  std::size_t lineEnd = (outHead_ | (kCacheLine - 1)) + 1;
  std::size_t inLine =
      std::min(data.size(), lineEnd - std::min<uint64_t>(lineEnd, outHead_ + kHeaderBytes));
  if (data.size() > inLine)
    copyIn(out_, outHead_ + kHeaderBytes + inLine, data.data() + inLine, data.size() - inLine);
  copyIn(out_, outHead_ + kStampBytes, reinterpret_cast<const std::byte*>(&header), sizeof header);
  if (inLine > 0) copyIn(out_, outHead_ + kHeaderBytes, data.data(), inLine);
  endMessage(outHead_, padded, true);
  return true;
}

bool ShmConnection::receiveWhole(MutableBytes data, Tag tag) {
  if (stampAt(in_, inTail_).load(std::memory_order_acquire) != (inTail_ | kValid | kWhole))
    return false;
  MessageHeader header;
  copyOut(in_, inTail_ + kStampBytes, reinterpret_cast<std::byte*>(&header), sizeof header);
  // A mismatch is reported by the queued path, with the request's description.
  if (header.tag != tag || header.length != data.size()) return false;
  if (!data.empty()) copyOut(in_, inTail_ + kHeaderBytes, data.data(), data.size());
  consume(paddedBytes(data.size()));
  return true;
}

std::size_t ShmConnection::freeSpace(std::size_t wanted) {
  std::size_t space = out_.bytes - static_cast<std::size_t>(outHead_ - outTailSeen_);
  if (space >= wanted) return space;
  outTailSeen_ = out_.ring->tail.load(std::memory_order_acquire);
  return out_.bytes - static_cast<std::size_t>(outHead_ - outTailSeen_);
}

void ShmConnection::endMessage(uint64_t start, std::size_t padded, bool stamp) {
  outHead_ = start + padded;
  stampAt(out_, outHead_).store(0, std::memory_order_relaxed);
  if (stamp)
    stampAt(out_, start).store(start | kValid | kWhole, std::memory_order_release);
  else
    out_.ring->head.store(outHead_, std::memory_order_release);
  device_.ringDoorbellOf(peerRank_);
}

void ShmConnection::consume(std::size_t n) {
  inTail_ += n;
  in_.ring->tail.store(inTail_, std::memory_order_release);
  device_.ringDoorbellOf(peerRank_);
}

void ShmConnection::close() {
  if (closed_) return;
  closed_ = true;
  if (!idle())
    failAll(std::make_exception_ptr(IoError(detail::concat(
        "rank ", selfRank_, "/", size_, ": connection to rank ", peerRank_, " closed"))));
}

bool ShmConnection::pump() {
  if (broken_) return false;
  bool moved = pumpSends();
  moved |= pumpReceives();
  if (!moved && !idle()) moved = failIfPeerClosed();
  return moved;
}

bool ShmConnection::pumpSends() {
  bool moved = false;
  while (!sends_.empty()) {
    Op& op = sends_.front();
    std::size_t padded = paddedBytes(op.header.length);
    std::size_t left = padded - op.done;
    uint64_t start = outHead_ - op.done;
    std::size_t space = freeSpace(std::min(left + kStampBytes, kChunk));
    // The message's end goes with room for the next stamp's slot; a piece before it is never
    // the end, and the first piece holds the whole header.
    bool last = left <= kChunk && space >= left + kStampBytes;
    std::size_t n = last ? left : std::min({left - 1, kChunk, space});
    if (n == 0 || (op.done == 0 && n < kHeaderBytes)) break;
    forPieces(reinterpret_cast<std::byte*>(&op.header), op.data, op.header.length, op.done, n,
              [&](const std::byte* piece, std::size_t length, std::size_t offset) {
                copyIn(out_, outHead_ + offset, piece, length);
              });
    bool first = op.done == 0;
    op.done += n;
    if (last) {
      endMessage(start, padded, first);
    } else {
      outHead_ += n;
      out_.ring->head.store(outHead_, std::memory_order_release);
      if (first) stampAt(out_, start).store(start | kValid, std::memory_order_release);
      device_.ringDoorbellOf(peerRank_);
    }
    op.state->moved = payloadMoved(op.done, op.header.length);
    moved = true;
    if (last) {
      op.state->done = true;
      sends_.pop_front();
    }
  }
  return moved;
}

bool ShmConnection::pumpReceives() {
  bool moved = false;
  while (!recvs_.empty()) {
    Op& op = recvs_.front();
    std::size_t padded = paddedBytes(op.header.length);
    if (op.done == 0) {
      uint64_t stamp = stampAt(in_, inTail_).load(std::memory_order_acquire);
      if ((stamp & ~kStampFlags) != inTail_ || !(stamp & kValid)) break;
      copyOut(in_, inTail_ + kStampBytes, reinterpret_cast<std::byte*>(&incoming_),
              sizeof incoming_);
      if (incoming_.tag != op.header.tag || incoming_.length != op.header.length) {
        failAll(std::make_exception_ptr(InternalError(detail::concat(
            op.state->description(), ": the peer sent tag=", hexTag(incoming_.tag), " ",
            incoming_.length, " bytes (the ranks disagree on the algorithm)"))));
        return true;
      }
      // A whole message is read at once; one that streams, from what the head counter shows.
      std::size_t n = (stamp & kWhole) ? padded : kHeaderBytes;
      if (n > kHeaderBytes) copyOut(in_, inTail_ + kHeaderBytes, op.data, op.header.length);
      consume(n);
      op.done = n;
    } else {
      std::size_t available =
          static_cast<std::size_t>(in_.ring->head.load(std::memory_order_acquire) - inTail_);
      std::size_t n = std::min({available, padded - op.done, kChunk});
      if (n == 0) break;
      forPieces(reinterpret_cast<std::byte*>(&incoming_), op.data, op.header.length, op.done, n,
                [&](std::byte* piece, std::size_t length, std::size_t offset) {
                  copyOut(in_, inTail_ + offset, piece, length);
                });
      consume(n);
      op.done += n;
    }
    op.state->moved = payloadMoved(op.done, op.header.length);
    moved = true;
    if (op.done == padded) {
      op.state->done = true;
      recvs_.pop_front();
    }
  }
  return moved;
}

bool ShmConnection::bytesWaiting() const {
  if (recvs_.empty()) return false;
  if (recvs_.front().done > 0) return in_.ring->head.load(std::memory_order_acquire) != inTail_;
  uint64_t stamp = stampAt(in_, inTail_).load(std::memory_order_acquire);
  return (stamp & kValid) && (stamp & ~kStampFlags) == inTail_;
}

namespace {

// The process's state letter from /proc/PID/stat ("PID (comm) STATE ...", where comm may itself
// hold spaces and parentheses), or 0 when it cannot be read.
char processState(int pid) {
  if (pid <= 0) return 0;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return 0;
  return text[close + 2];
}

}  // namespace

bool ShmConnection::peerStopped() const {
  char state = processState(peerPid_);
  return state == 'T' || state == 't';
}

std::string ShmConnection::peerState() const {
  char state = processState(peerPid_);
  if (!state) return "";
  std::string who = detail::concat("; rank ", peerRank_, "'s process (pid ", peerPid_, ") is ");
  if (state == 'T' || state == 't') return who + "stopped (SIGSTOP, a debugger, a paused job)";
  if (state == 'D') return who + "in uninterruptible sleep (a stuck device or file system)";
  if (state == 'Z') return who + "a zombie (it exited)";
  return who + "running";
}

bool ShmConnection::failIfPeerClosed() {
  if (!device_.peerClosed(peerRank_)) return false;
  // What the peer wrote before closing is still in our ring: a receive it covers completes.
  if (bytesWaiting()) return false;
  const Op& op = recvs_.empty() ? sends_.front() : recvs_.front();
  // A peer closes because it failed, most often because another rank died: name that one,
  // which every rank then blames alike.
  std::string exited = device_.exitedPeer();
  failAll(error(op, exited.empty()
                        ? std::string("the peer closed its connection (it shut down or failed)")
                        : "the peer closed its connection after " + exited));
  return true;
}

void ShmConnection::failAll(std::exception_ptr error) {
  if (!broken_) broken_ = error;
  for (auto* queue : {&sends_, &recvs_}) {
    for (auto& op : *queue) {
      op.state->error = error;
      op.state->done = true;
    }
    queue->clear();
  }
}

}  // namespace hvd::collectives::shm
