#include "runtime/engine/failure_notice.h"

#include <algorithm>

#include "common/error.h"
#include "runtime/engine/messages.h"

namespace hvd::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kNoticeFlush{1000};
// How long a rank whose collective failed listens for a peer's notice that it failed first.
constexpr std::chrono::milliseconds kPeerFailureWait{200};

}  // namespace

std::exception_ptr inOperation(const std::string& description, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerLost& e) {
    return std::make_exception_ptr(PeerLost(detail::concat(description, ": ", e.what())));
  } catch (const IoError& e) {
    return std::make_exception_ptr(IoError(detail::concat(description, ": ", e.what())));
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(detail::concat(description, ": ", e.what())));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(Error(detail::concat(description, ": ", e.what())));
  } catch (...) {
    return error;
  }
}

std::string whatOf(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

bool causedByPeer(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerLost&) {
    return true;
  } catch (...) {
    return false;
  }
}

std::exception_ptr outOfMemory(int rank, const std::string& type,
                               const std::vector<LocalOp*>& ops) {
  std::size_t bytes = 0;
  std::string what;
  for (LocalOp* op : ops)
    if (op) {
      bytes += op->request.totalBytes();
      if (what.empty()) what = op->request.describe();
    }
  if (what.empty()) what = type + " (for joined ranks)";
  if (ops.size() > 1) what += detail::concat(" and ", ops.size() - 1, " fused with it");
  return std::make_exception_ptr(Error(detail::concat(
      "rank ", rank, ": out of memory (std::bad_alloc) running ", what,
      " (this rank's input: ", bytes,
      " bytes; outputs, fusion and transport buffers come on top): lower the batch or "
      "HVD_FUSION_THRESHOLD, or give the job more memory")));
}

void announceFailure(ControlChannel& control, int rank, int size, const std::string& why) {
  try {
    if (rank == 0) {
      ResponseList list;
      Response r;
      r.kind = ResponseKind::Fatal;
      r.message = why;
      list.responses.push_back(r);
      std::string bytes = list.encode();
      for (int peer = 1; peer < size; ++peer) {
        try {
          control.send(peer, bytes);
        } catch (const std::exception&) {
          // That peer's link broke (it may be the one that died); tell the others.
        }
      }
    } else {
      RequestList list;
      list.failure = detail::concat("rank ", rank, ": ", why);
      control.send(0, list.encode());
    }
    control.flush(Clock::now() + kNoticeFlush);
  } catch (const std::exception&) {
    // Best effort: the peers that cannot be told learn it from their broken links.
  }
}

std::string peerFailure(ControlChannel& control, int rank, std::chrono::milliseconds wait) {
  auto deadline = Clock::now() + wait;
  try {
    for (;;) {
      for (auto& [peer, bytes] : control.receiveSurviving()) {
        if (rank == 0) {
          RequestList list = RequestList::decode(bytes);
          if (!list.failure.empty())
            return detail::concat("rank ", peer, " had failed: ", list.failure);
        } else {
          for (const auto& r : ResponseList::decode(bytes).responses)
            if (r.kind == ResponseKind::Fatal) return "the job had failed: " + r.message;
        }
      }
      if (Clock::now() >= deadline) break;
      control.waitForActivity(std::min(deadline, Clock::now() + std::chrono::milliseconds(10)));
    }
  } catch (const std::exception&) {
    // A message that does not decode: the control links are failing too.
  }
  return "";
}

std::exception_ptr reportCollectiveFailure(ControlChannel& control, int rank, int size,
                                           std::exception_ptr error) {
  std::string cause = peerFailure(control, rank, std::chrono::milliseconds(0));
  announceFailure(control, rank, size, whatOf(error));
  if (cause.empty()) cause = peerFailure(control, rank, kPeerFailureWait);
  if (cause.empty()) return error;
  return std::make_exception_ptr(PeerLost(detail::concat(whatOf(error), "; ", cause)));
}

}  // namespace hvd::runtime
