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

void ControlChannel::send(int peer, const std::string& message) {
  uint64_t length = message.size();
  std::array<std::byte, kFrame> frame{};
  std::memcpy(frame.data(), &length, sizeof length);
  std::size_t inlined = std::min<std::size_t>(length, kInline);
  std::memcpy(frame.data() + sizeof length, message.data(), inlined);
  auto& link = comm_->peer(peer);
  try {
    auto header = link.isend(collectives::ConstBytes(frame), kControlTag);
    collectives::Request rest;
    if (length > inlined)
      rest = link.isend(collectives::ConstBytes(
                            reinterpret_cast<const std::byte*>(message.data()) + inlined,
                            length - inlined),
                        kControlTag);
    header.wait(comm_->deadline());
    rest.wait(comm_->deadline());
  } catch (const TimeoutError&) {
    throw;
  } catch (const std::exception& e) {
    linkBroke(peer, e);
  }
}

std::vector<std::pair<int, std::string>> ControlChannel::receive() {
  std::vector<std::pair<int, std::string>> messages;
  if (auto* progress = comm_->progress()) progress->poll();
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
