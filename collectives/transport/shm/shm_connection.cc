#include "collectives/transport/shm/shm_connection.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "collectives/transport/shm/shm_device.h"
#include "common/error.h"

namespace hvd::collectives::shm {
namespace {

constexpr std::size_t kHeaderBytes = sizeof(MessageHeader);
// A writer publishes its progress at least every kChunk bytes, so the reader copies out the
// start of a large message while the writer is still copying in the rest.
constexpr std::size_t kChunk = 128 * 1024;

// Where a ring position falls in the ring's bytes: a mask for the power-of-two sizes rings
// have by default, where a 64-bit division would cost each small message's four copies tens of
// nanoseconds.
std::size_t ringOffset(const RingView& ring, uint64_t at) {
  std::size_t size = ring.bytes;
  return (size & (size - 1)) == 0 ? static_cast<std::size_t>(at & (size - 1))
                                  : static_cast<std::size_t>(at % size);
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

// Calls move(piece, length, offset) for the next n bytes of a message whose `done` bytes have
// moved: first what is left of the header (at `header`), then of the payload; `offset` is
// where the piece starts among those n bytes.
template <typename Move>
void forPieces(std::byte* header, std::byte* payload, std::size_t done, std::size_t n,
               Move&& move) {
  std::size_t first = done < kHeaderBytes ? std::min(n, kHeaderBytes - done) : 0;
  if (first > 0) move(header + done, first, std::size_t{0});
  if (n > first) move(payload + (done + first - kHeaderBytes), n - first, first);
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
  std::size_t total = kHeaderBytes + data.size();
  if (total > kChunk) return false;
  if (freeSpace(total) < total) return false;
  MessageHeader header{tag, data.size()};
  copyIn(out_, outHead_, reinterpret_cast<const std::byte*>(&header), kHeaderBytes);
  if (!data.empty()) copyIn(out_, outHead_ + kHeaderBytes, data.data(), data.size());
  publish(total);
  return true;
}

bool ShmConnection::receiveWhole(MutableBytes data, Tag tag) {
  std::size_t total = kHeaderBytes + data.size();
  uint64_t head = in_.ring->head.load(std::memory_order_acquire);
  if (static_cast<std::size_t>(head - inTail_) < total) return false;
  MessageHeader header;
  copyOut(in_, inTail_, reinterpret_cast<std::byte*>(&header), kHeaderBytes);
  // A mismatch is reported by the queued path, with the request's description.
  if (header.tag != tag || header.length != data.size()) return false;
  if (!data.empty()) copyOut(in_, inTail_ + kHeaderBytes, data.data(), data.size());
  consume(total);
  return true;
}

std::size_t ShmConnection::freeSpace(std::size_t wanted) {
  std::size_t space = out_.bytes - static_cast<std::size_t>(outHead_ - outTailSeen_);
  if (space >= wanted) return space;
  outTailSeen_ = out_.ring->tail.load(std::memory_order_acquire);
  return out_.bytes - static_cast<std::size_t>(outHead_ - outTailSeen_);
}

void ShmConnection::publish(std::size_t n) {
  outHead_ += n;
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
    std::size_t total = kHeaderBytes + op.header.length;
    std::size_t n = std::min(total - op.done, kChunk);
    std::size_t space = freeSpace(n);
    if (space == 0) break;
    n = std::min(n, space);
    forPieces(reinterpret_cast<std::byte*>(&op.header), op.data, op.done, n,
              [&](const std::byte* piece, std::size_t length, std::size_t offset) {
                copyIn(out_, outHead_ + offset, piece, length);
              });
    publish(n);
    op.done += n;
    op.state->moved = op.done;
    moved = true;
    if (op.done == total) {
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
    std::size_t total = kHeaderBytes + op.header.length;
    uint64_t head = in_.ring->head.load(std::memory_order_acquire);
    std::size_t available = static_cast<std::size_t>(head - inTail_);
    if (available == 0) break;
    std::size_t n = std::min({available, total - op.done, kChunk});
    forPieces(reinterpret_cast<std::byte*>(&incoming_), op.data, op.done, n,
              [&](std::byte* piece, std::size_t length, std::size_t offset) {
                copyOut(in_, inTail_ + offset, piece, length);
              });
    if (op.done < kHeaderBytes && op.done + n >= kHeaderBytes &&
        (incoming_.tag != op.header.tag || incoming_.length != op.header.length)) {
      failAll(std::make_exception_ptr(InternalError(
          detail::concat(op.state->description(), ": the peer sent tag=", hexTag(incoming_.tag),
                         " ", incoming_.length, " bytes (the ranks disagree on the algorithm)"))));
      return true;
    }
    consume(n);
    op.done += n;
    op.state->moved = op.done;
    moved = true;
    if (op.done == total) {
      op.state->done = true;
      recvs_.pop_front();
    }
  }
  return moved;
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
  if (!recvs_.empty() && in_.ring->head.load(std::memory_order_acquire) != inTail_) return false;
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
