// How a transport's wait passes the time until its operation completes: the polling every
// transport shares (SpinPolicy), the limits on a transfer that stopped moving (StallWatch) and
// the kind of sleep once polling is over (WaitMode). The runtime chooses one WaitPolicy per
// communicator (runtime/world.cc says which and why) and hands it to whichever transport the
// transport table picks (runtime/transport_table.h); each transport takes the parts it
// implements. Plain values: copied into the device that uses them, read by its waiting thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::collectives {

// A message up to this size is latency-bound: a wait for one may spin (see progressUntil).
inline constexpr std::size_t kLatencyBoundBytes = 64 * 1024;

// A count of callers blocked until an operation's result comes (the runtime's handle waits).
// While it is above zero, a data link's waits on large transfers poll as its waits on small
// messages do: the blocked callers' cores have nothing else to run, so polling takes nothing
// from them, and each sleep on a large transfer costs a wake-up.
using BlockedCallers = std::shared_ptr<const std::atomic<int>>;

// How long a wait on one send or receive may go without the transfer moving on. After
// `warnAfter` it is logged once, naming the peer, the bytes moved and (where the transport can
// tell) the state of the peer's process; after `failAfter` it fails with TimeoutError. After
// `stoppedPeerAfter` it fails with PeerLost where the transport sees the peer's process stopped
// (shared memory: SIGSTOP, a debugger, a paused job), naming it. Zero: no limit (the wait's
// deadline still applies).
struct StallWatch {
  std::chrono::milliseconds warnAfter{0};
  std::chrono::milliseconds failAfter{0};
  std::chrono::milliseconds stoppedPeerAfter{0};  // HVD_LIVENESS_TIMEOUT_SECONDS
  std::shared_ptr<log::Logs> logs = nullptr;  // the warning's (the Runtime's); null: the process's
};

// How a transport's wait passes the time until its message arrives: polling (yielding the core
// to any other runnable thread between polls) for up to a spin time, then sleeping in the
// kernel. Both transports take one.
struct SpinPolicy {
  // For a wait on a message of at most kLatencyBoundBytes.
  std::chrono::microseconds smallSpin{0};
  // For a wait on a larger transfer. A waiter with nothing else to do gains by polling (on a
  // VM whose idle vCPUs halt, each sleep costs a slow wake-up, and a large transfer wakes its
  // waiter many times); one whose core has other work to run loses by it.
  std::chrono::microseconds largeSpin{0};
  // While it counts a caller, waits on larger transfers poll for smallSpin too, if longer.
  BlockedCallers blockedCallers = nullptr;
  // How long a transfer that stopped moving is waited for (Request::wait).
  StallWatch stall{};

  // How long a wait on a message (latency-bound or not) polls before it sleeps.
  std::chrono::microseconds spinFor(bool latencyBound) const;
};

// How a wait with a single small receive pending sleeps once any spin is over. Only TCP has a
// choice: shared memory always sleeps on its segment's doorbell, which wake() rings.
enum class WaitMode {
  // In poll() on the socket and the wake-up eventfd: wake() ends the wait at once.
  Interruptible,
  // In a blocking recvmsg on the socket (the kernel then copies the message as it wakes the
  // thread: one system call instead of poll plus recvmsg per message). wake() is then seen only
  // when the receive's 50 ms slice ends, so this is for devices no other thread wakes (data
  // links); waits on several sockets still use poll().
  Blocking,
};

// How a wait on a device's requests passes the time until its operation completes: the
// polling all transports share, then the kind of sleep.
struct WaitPolicy {
  SpinPolicy spins{};
  WaitMode mode = WaitMode::Interruptible;
};

}  // namespace hvd::collectives
