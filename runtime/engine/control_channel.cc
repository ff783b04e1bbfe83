#include "runtime/engine/control_channel.h"

#include <cstring>

#include "common/error.h"

namespace hvd::runtime {
namespace {
constexpr collectives::Tag kControlTag = 0xC0ull << 56;
}

ControlChannel::ControlChannel(std::unique_ptr<collectives::Comm> comm, std::vector<int> listenTo,
                               std::vector<std::string> hostOfRank)
    : comm_(std::move(comm)), hostOfRank_(std::move(hostOfRank)) {
  inbound_.resize(listenTo.size());
  for (std::size_t i = 0; i < listenTo.size(); ++i) inbound_[i].peer = listenTo[i];
  for (auto& in : inbound_) postHeader(in);
}

void ControlChannel::postHeader(Inbound& in) {
  in.inBody = false;
  in.header = comm_->peer(in.peer).irecv(collectives::MutableBytes(in.frame), kControlTag);
}

void ControlChannel::linkBroke(int peer, const std::exception& e) const {
  std::string host = static_cast<std::size_t>(peer) < hostOfRank_.size()
                         ? " (host " + hostOfRank_[peer] + ")"
                         : std::string();
  throw PeerLost(detail::concat("rank ", comm_->rank(), ": control link to rank ", peer, host,
                                " broke (its process exited, crashed or was killed): ", e.what()));
}

void ControlChannel::send(int peer, std::string message) {
  auto& out = outbound_.emplace_back();
  out.peer = peer;
  out.payload = std::move(message);
  out.deadline = comm_->deadline();
  uint64_t length = out.payload.size();
  std::memcpy(out.frame.data(), &length, sizeof length);
  std::size_t inlined = std::min<std::size_t>(length, kInline);
  std::memcpy(out.frame.data() + sizeof length, out.payload.data(), inlined);
  auto& link = comm_->peer(peer);
  try {
    out.header = link.isend(collectives::ConstBytes(out.frame), kControlTag);
    if (length > inlined)
      out.body = link.isend(
          collectives::ConstBytes(reinterpret_cast<const std::byte*>(out.payload.data()) + inlined,
                                  length - inlined),
          kControlTag);
  } catch (const std::exception& e) {
    outbound_.pop_back();
    linkBroke(peer, e);
  }
  // The usual small message has left already (a send that fits the link's buffer completes at
  // once); a larger one moves on as the peer reads.
  if (auto* progress = comm_->progress()) progress->poll();
  retireSends();
}

void ControlChannel::finish(std::list<Outbound>::iterator it, collectives::Deadline deadline) {
  // Out of the queue before anything is thrown, so that a link that broke fails once and the
  // messages to the other peers still go.
  try {
    it->header.wait(deadline);
    it->body.wait(deadline);
  } catch (const TimeoutError&) {
    // The transport may still read the message's frame and payload: they stay where they are.
    timedOut_.splice(timedOut_.end(), outbound_, it);
    throw;
  } catch (const std::exception& e) {
    int peer = it->peer;
    outbound_.erase(it);
    linkBroke(peer, e);
  }
  outbound_.erase(it);
}

void ControlChannel::retireSends() {
  auto now = collectives::Clock::now();
  for (auto it = outbound_.begin(); it != outbound_.end();) {
    auto next = std::next(it);
    bool done = false;
    try {
      done = it->header.test() && it->body.test();
    } catch (const std::exception&) {
      done = true;  // failed: finish() reports it
    }
    // Past its deadline, wait() throws the transport's TimeoutError naming the peer.
    if (done || now >= it->deadline) finish(it, it->deadline);
    it = next;
  }
}

void ControlChannel::flush(collectives::Deadline deadline) {
  std::exception_ptr first;
  while (!outbound_.empty()) {
    try {
      finish(outbound_.begin(), std::min(deadline, outbound_.front().deadline));
    } catch (const std::exception&) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

std::vector<std::pair<int, std::string>> ControlChannel::receive() {
  std::vector<std::pair<int, std::string>> messages;
  if (auto* progress = comm_->progress()) progress->poll();
  retireSends();
  for (auto& in : inbound_) {
    try {
      readArrived(in, messages);
    } catch (const std::exception& e) {
      linkBroke(in.peer, e);
    }
  }
  return messages;
}

std::vector<std::pair<int, std::string>> ControlChannel::receiveSurviving() {
  std::vector<std::pair<int, std::string>> messages;
  try {
    if (auto* progress = comm_->progress()) progress->poll();
    retireSends();
  } catch (const std::exception&) {
    // A queued send to a dead peer; what the living ones sent is still readable.
  }
  for (auto& in : inbound_) {
    if (in.broken) continue;
    try {
      readArrived(in, messages);
    } catch (const std::exception&) {
      in.broken = true;
    }
  }
  return messages;
}

void ControlChannel::readArrived(Inbound& in, std::vector<std::pair<int, std::string>>& out) {
  while (true) {
    if (!in.inBody) {
      if (!in.header.test()) break;
      uint64_t length = 0;
      std::memcpy(&length, in.frame.data(), sizeof length);
      std::size_t inlined = std::min<std::size_t>(length, kInline);
      in.payload.assign(reinterpret_cast<const char*>(in.frame.data()) + sizeof length, inlined);
      in.payload.resize(length);
      in.inBody = true;
      in.body = {};
      if (length > inlined)
        in.body = comm_->peer(in.peer).irecv(
            collectives::MutableBytes(reinterpret_cast<std::byte*>(in.payload.data()) + inlined,
                                      length - inlined),
            kControlTag);
    }
    if (!in.body.test()) break;
    out.emplace_back(in.peer, std::move(in.payload));
    postHeader(in);
  }
}

void ControlChannel::waitForActivity(collectives::Deadline deadline) {
  if (wakePending_.exchange(false)) return;
  if (auto* progress = comm_->progress()) {
    progress->progressUntil(deadline, false);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_until(lock, deadline, [&] { return wakePending_.exchange(false); });
}

void ControlChannel::wake() {
  if (auto* progress = comm_->progress()) {
    wakePending_ = true;
    return progress->wake();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    wakePending_ = true;
  }
  cv_.notify_one();
}

}  // namespace hvd::runtime
