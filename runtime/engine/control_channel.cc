#include "runtime/engine/control_channel.h"

#include <cstring>

#include "common/error.h"

namespace hvd::runtime {
namespace {
constexpr collectives::Tag kControlTag = 0xC0ull << 56;
}

ControlChannel::ControlChannel(std::unique_ptr<collectives::Comm> comm, std::vector<int> listenTo)
    : comm_(std::move(comm)) {
  inbound_.resize(listenTo.size());
  for (std::size_t i = 0; i < listenTo.size(); ++i) inbound_[i].peer = listenTo[i];
  for (auto& in : inbound_) postHeader(in);
}

void ControlChannel::postHeader(Inbound& in) {
  in.inBody = false;
  in.header = comm_->peer(in.peer).irecv(collectives::MutableBytes(in.frame), kControlTag);
}

void ControlChannel::linkBroke(int peer, const std::exception& e) const {
  throw IoError(detail::concat("rank ", comm_->rank(), ": control link to rank ", peer,
                               " broke (its process exited, crashed or was killed): ", e.what()));
}

void ControlChannel::send(int peer, std::string message) {
  retireSends();
  auto& out = outbound_.emplace_back();
  out.peer = peer;
  out.message = std::move(message);
  out.deadline = comm_->deadline();
  uint64_t length = out.message.size();
  std::memcpy(out.frame.data(), &length, sizeof length);
  std::size_t inlined = std::min<std::size_t>(length, kInline);
  std::memcpy(out.frame.data() + sizeof length, out.message.data(), inlined);
  auto& link = comm_->peer(peer);
  try {
    out.header = link.isend(collectives::ConstBytes(out.frame), kControlTag);
    if (length > inlined)
      out.rest = link.isend(collectives::ConstBytes(
                                reinterpret_cast<const std::byte*>(out.message.data()) + inlined,
                                length - inlined),
                            kControlTag);
  } catch (const std::exception& e) {
    linkBroke(peer, e);
  }
  // The usual small message has left already (a send that fits the link's buffer completes at
  // once); a larger one moves on as the peer reads.
  if (auto* progress = comm_->progress()) progress->poll();
  retireSends();
}

void ControlChannel::retireSends() {
  for (auto it = outbound_.begin(); it != outbound_.end();) {
    try {
      if (it->header.test() && it->rest.test()) {
        it = outbound_.erase(it);
        continue;
      }
      // Past its deadline, wait() throws the transport's TimeoutError naming the peer.
      if (collectives::Clock::now() >= it->deadline) {
        it->header.wait(it->deadline);
        it->rest.wait(it->deadline);
      }
    } catch (const TimeoutError&) {
      throw;
    } catch (const std::exception& e) {
      linkBroke(it->peer, e);
    }
    ++it;
  }
}

void ControlChannel::flush(collectives::Deadline deadline) {
  for (auto& out : outbound_) {
    try {
      out.header.wait(std::min(deadline, out.deadline));
      out.rest.wait(std::min(deadline, out.deadline));
    } catch (const TimeoutError&) {
      throw;
    } catch (const std::exception& e) {
      linkBroke(out.peer, e);
    }
  }
  outbound_.clear();
}

std::vector<std::pair<int, std::string>> ControlChannel::receive() {
  std::vector<std::pair<int, std::string>> messages;
  if (auto* progress = comm_->progress()) progress->poll();
  retireSends();
  for (auto& in : inbound_) {
    try {
      while (true) {
        if (!in.inBody) {
          if (!in.header.test()) break;
          uint64_t length = 0;
          std::memcpy(&length, in.frame.data(), sizeof length);
          std::size_t inlined = std::min<std::size_t>(length, kInline);
          in.payload.assign(reinterpret_cast<const char*>(in.frame.data()) + sizeof length,
                            inlined);
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
        messages.emplace_back(in.peer, std::move(in.payload));
        postHeader(in);
      }
    } catch (const std::exception& e) {
      linkBroke(in.peer, e);
    }
  }
  return messages;
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
