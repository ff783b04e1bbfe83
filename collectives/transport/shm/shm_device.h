// The shared-memory transport's Device, for ranks on one host. connectAll creates this rank's
// segment (shm_segment.h), publishes its name as "shm/<rank>" in the store, reads every
// rank's from the one table rank 0 gathers (rendezvous/rank_table.h), maps every peer's, and
// unlinks its own once all have mapped it (reported the same way, "shm-mapped/<rank>"). Any rank
// that cannot (no /dev/shm, too little space, a peer's segment not visible from here: another host
// or container) makes every rank throw ShmUnavailable, so all fall back to another transport
// together.
//
// Waiting: a thread with nothing to move polls the rings for its SpinPolicy's spin, then sleeps
// on its segment's doorbell (a futex). A peer that puts bytes in this rank's ring, or frees
// space in one it writes, rings the doorbell; so does wake(). A sleep lasts at most kSlice, after
// which the device checks that its peers' processes still exist: a peer that died fails the
// requests waiting on it with an IoError naming it, within about kSlice.
// Thread model: one thread uses the device and its connections at a time (the Comm's); wake()
// may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "collectives/transport/device.h"
#include "collectives/transport/shm/shm_segment.h"
#include "common/error.h"
#include "common/spin.h"

namespace hvd::log {
class Logs;  // common/logging.h
}  // namespace hvd::log

namespace hvd::collectives::shm {

class ShmConnection;

// Some rank could not set up the shm transport; the message gives each such rank's reason.
class ShmUnavailable : public TransportUnavailable {
 public:
  using TransportUnavailable::TransportUnavailable;
};

// The message size this transport's communicators ask pipelined collectives for: a message is
// copied into a ring by its sender and out of it (often reduced) by its receiver, and at 128 KiB
// it is still in the core's cache for the second copy (4 and 16 MiB allreduces 7-13% faster
// than with TCP's 512 KiB on this project's machine).
inline constexpr std::size_t kPipelineSegmentBytes = 128 * 1024;

struct ShmOptions {
  std::size_t ringBytes = 1 << 20;  // per direction of each link; a multiple of 64
  SpinPolicy spins{};               // polling before a sleep on the doorbell
  std::string namePrefix = "hvd";   // of the segment's name in /dev/shm (jobSegmentPrefix)
  std::shared_ptr<log::Logs> logs = nullptr;  // the owning Runtime's; null: the process's
};

class ShmDevice : public Device,
                  public ProgressEngine,
                  public std::enable_shared_from_this<ShmDevice> {
 public:
  static std::shared_ptr<ShmDevice> create(ShmOptions options);
  ~ShmDevice() override;  // marks this rank's segment closed, so waiting peers fail at once

  std::unique_ptr<Comm> connectAll(int rank, int size, rendezvous::Store& store,
                                   std::chrono::milliseconds connectTimeout,
                                   std::chrono::milliseconds opTimeout,
                                   LinkShape shape = LinkShape::AllPairs) override;
  void progressUntil(Deadline deadline, bool latencyBound) override;
  void poll() override;
  void wake() override;
  const StallWatch& stallWatch() const override { return options_.spins.stall; }

  // For ShmConnection.
  void ringDoorbellOf(int peer);
  bool peerClosed(int peer) const;
  // "rank P (shm, pid N) exited" for a peer process of this job that is gone, or "".
  std::string exitedPeer() const;
  void forget(ShmConnection* connection);

  static constexpr std::chrono::milliseconds kSlice{100};

 private:
  explicit ShmDevice(ShmOptions options) : options_(options) {}
  bool pumpAll();
  void sleepOnDoorbell(Deadline deadline);
  // Fails the requests of peers whose process has exited.
  void failDeadPeers();
  bool peerExited(int peerRank) const;
  void watchPeerProcesses();

  ShmOptions options_;
  int rank_ = 0;
  int size_ = 0;
  Segment own_;
  std::vector<Segment> peers_;  // by rank; empty at this rank's index
  std::vector<ShmConnection*> connections_;
  std::vector<int> pidFds_;  // by rank; -1 where a peer's exit cannot be watched this way
  std::vector<int> pids_;    // by rank; 0 where pids are not comparable (another namespace)
  std::atomic<bool> wakeRequested_{false};
  ContentionWatch contention_;  // whether polling pays (common/spin.h)
};

}  // namespace hvd::collectives::shm
