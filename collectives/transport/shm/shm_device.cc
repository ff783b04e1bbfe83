#include "collectives/transport/shm/shm_device.h"

#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "collectives/rendezvous/rank_table.h"
#include "collectives/transport/shm/shm_connection.h"
#include "common/format.h"
#include "common/logging.h"
#include "common/spin.h"

namespace hvd::collectives::shm {
namespace {

constexpr unsigned kPollsPerYield = 16;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

uint32_t* futexWord(std::atomic<uint32_t>& word) { return reinterpret_cast<uint32_t*>(&word); }

void futexWake(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, futexWord(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futexWait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  ::syscall(SYS_futex, futexWord(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

rendezvous::Bytes bytesOf(const std::string& s) { return rendezvous::Bytes(s.begin(), s.end()); }
std::string textOf(const rendezvous::Bytes& b) { return std::string(b.begin(), b.end()); }

// Publishes this rank's `value` under prefix<rank> and returns every rank's, from the one table
// rank 0 gathers (rendezvous/rank_table.h: O(N) store requests in all); `awaited` says for what,
// in a timeout's message. A value starting with '!' is a rank's reason for not using shm.
std::vector<std::string> exchange(rendezvous::Store& store, const std::string& prefix, int rank,
                                  int size, const std::string& value,
                                  std::chrono::milliseconds timeout, const std::string& self,
                                  const std::string& awaited) {
  std::vector<rendezvous::Bytes> table;
  try {
    table = rendezvous::gatherRankTable(store, prefix, rank, size, bytesOf(value), timeout);
  } catch (const rendezvous::RankTableTimeout& e) {
    throw TimeoutError(detail::concat(self, ": timed out after ", timeout.count() / 1000.0,
                                      " s waiting for ranks ", rankSet(e.missingRanks()), " to ",
                                      awaited,
                                      " (did they start? HVD_START_TIMEOUT sets the limit)"));
  }
  std::vector<std::string> values;
  values.reserve(table.size());
  for (const auto& v : table) values.push_back(textOf(v));
  return values;
}

// Throws ShmUnavailable, on every rank alike, when any rank gave a reason.
void requireAll(const std::vector<std::string>& values, const std::string& self) {
  std::string reasons;
  for (std::size_t r = 0; r < values.size(); ++r)
    if (!values[r].empty() && values[r][0] == '!')
      reasons += detail::concat(reasons.empty() ? "" : "; ", "rank ", r, ": ", values[r].substr(1));
  if (!reasons.empty()) throw ShmUnavailable(self + ": shared memory unavailable: " + reasons);
}

int openPidFd(int pid) {
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
}

}  // namespace

std::shared_ptr<ShmDevice> ShmDevice::create(ShmOptions options) {
  HVD_ENFORCE(options.ringBytes >= 4096 && options.ringBytes % kCacheLine == 0, "shm: ring bytes ",
              options.ringBytes, " must be at least 4096 and a multiple of ", kCacheLine);
  return std::shared_ptr<ShmDevice>(new ShmDevice(options));
}

ShmDevice::~ShmDevice() {
  if (size_ > 0) {
    own_.header().closed.store(1, std::memory_order_seq_cst);
    for (int p = 0; p < size_; ++p)
      if (p != rank_) ringDoorbellOf(p);
  }
  for (int fd : pidFds_)
    if (fd >= 0) ::close(fd);
}

std::unique_ptr<Comm> ShmDevice::connectAll(int rank, int size, rendezvous::Store& store,
                                            std::chrono::milliseconds connectTimeout,
                                            std::chrono::milliseconds opTimeout, LinkShape) {
  // Every shape gets all pairs: each segment holds a ring per peer whichever are used.
  HVD_ENFORCE(rank >= 0 && rank < size, "rank ", rank, " outside [0, ", size, ")");
  HVD_ENFORCE(size_ == 0, "shm: connectAll called twice on one device");
  std::string self = detail::concat("rank ", rank, "/", size);
  auto log = log::logger(options_.logs.get(), "shm");
  std::string created;
  try {
    own_ = Segment::create(rank, size, options_.ringBytes, options_.namePrefix);
    created = own_.name();
  } catch (const IoError& e) {
    created = std::string("!") + e.what();
  }
  auto names = exchange(store, "shm/", rank, size, created, connectTimeout, self,
                        "publish their addresses (shared-memory segments)");
  requireAll(names, self);

  peers_.resize(size);
  std::string mapped = "ok";
  try {
    for (int r = 0; r < size; ++r)
      if (r != rank) peers_[r] = Segment::open(names[r], r, size, options_.ringBytes, rank);
  } catch (const IoError& e) {
    mapped = std::string("!") + e.what() + " (ranks on different hosts or containers?)";
  }
  requireAll(exchange(store, "shm-mapped/", rank, size, mapped, connectTimeout, self,
                      "map this rank's shared-memory segment"),
             self);
  own_.unlink();  // every peer has it mapped; the name is no longer needed

  rank_ = rank;
  size_ = size;
  watchPeerProcesses();
  std::vector<std::shared_ptr<Connection>> connections(size);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    RingView in{&own_.ring(p), own_.ringData(p), options_.ringBytes, own_.ringPages(p)};
    RingView out{&peers_[p].ring(rank), peers_[p].ringData(rank), options_.ringBytes,
                 peers_[p].ringPages(rank)};
    auto c = std::make_shared<ShmConnection>(*this, rank, size, p, peers_[p].header().pid, in, out);
    connections_.push_back(c.get());
    connections[p] = std::move(c);
  }
  log->debug("{}: shared memory with {} local peers, rings of {} KiB", self, size - 1,
             options_.ringBytes >> 10);
  auto comm =
      std::make_unique<Comm>(rank, size, std::move(connections), opTimeout, shared_from_this());
  comm->setPipelineSegmentBytes(kPipelineSegmentBytes);
  comm->setBuffersPerPeer(true);  // rings are taken at a pair's first use
  comm->setLinkName("shm");
  return comm;
}

void ShmDevice::watchPeerProcesses() {
  std::string ns = pidNamespace();
  int me = static_cast<int>(getpid());
  pidFds_.assign(size_, -1);
  pids_.assign(size_, 0);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const auto& h = peers_[p].header();
    // Pids mean the same only within one pid namespace; a peer in this process (a test's
    // thread) outlives any wait of ours.
    if (ns.empty() || ns != h.pidNamespace || h.pid == me) continue;
    pids_[p] = h.pid;
    pidFds_[p] = openPidFd(h.pid);
  }
}

void ShmDevice::ringDoorbellOf(int peer) {
  auto& h = peers_[peer].header();
  // What the peer is to see was stored before this fence; a sleeper announces itself (a
  // seq_cst add) before its last look (sleepOnDoorbell). So either that look finds the change
  // or this load finds the sleeper, and the doorbell, a line the peer reads, is written only
  // for a sleeper: an atomic add on it for every message cost a small message's round trip a
  // tenth of its time.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h.sleepers.load(std::memory_order_seq_cst) > 0) {
    h.doorbell.fetch_add(1, std::memory_order_seq_cst);
    futexWake(h.doorbell);
  }
}

bool ShmDevice::peerClosed(int peer) const {
  return peers_[peer].header().closed.load(std::memory_order_acquire) != 0;
}

void ShmDevice::forget(ShmConnection* connection) {
  connections_.erase(std::remove(connections_.begin(), connections_.end(), connection),
                     connections_.end());
}

bool ShmDevice::pumpAll() {
  bool moved = false;
  for (auto* c : connections_)
    if (!c->idle()) moved |= c->pump();
  return moved;
}

void ShmDevice::poll() { pumpAll(); }

void ShmDevice::wake() {
  wakeRequested_.store(true);
  if (size_ == 0) return;
  auto& h = own_.header();
  h.doorbell.fetch_add(1, std::memory_order_seq_cst);
  futexWake(h.doorbell);
}

void ShmDevice::progressUntil(Deadline deadline, bool latencyBound) {
  if (pumpAll()) return;
  auto spin = options_.spins.spinFor(latencyBound);
  // Not where the core is contended (common/spin.h).
  if (spin.count() > 0 && contention_.beginPoll()) {
    // A look at the rings costs a few loads, where TCP's costs a system call: look often, and
    // yield the core (to a thread of this rank that may be the one to produce the message)
    // every kPollsPerYield looks and when checking the time.
    auto until = std::min(deadline, Clock::now() + spin);
    for (unsigned i = 1;; ++i) {
      if (pumpAll()) return contention_.pollEnded();
      if (i % kPollsPerYield != 0) {
        cpuRelax();
        continue;
      }
      if (Clock::now() >= until) {
        contention_.pollEnded();
        break;
      }
      if (!contention_.yield()) break;
    }
  }
  sleepOnDoorbell(deadline);
}

void ShmDevice::sleepOnDoorbell(Deadline deadline) {
  if (size_ == 0) return;
  auto& h = own_.header();
  // Announce the sleep before the last look at the rings: a peer that moves bytes after that
  // look sees a sleeper and wakes us, or changes the doorbell so the futex does not sleep.
  h.sleepers.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with ringDoorbellOf's fence: the rings' acquire loads below come after it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t seen = h.doorbell.load(std::memory_order_seq_cst);
  bool ready = pumpAll() || wakeRequested_.exchange(false);
  auto left = deadline - Clock::now();
  if (!ready && left > Clock::duration::zero()) {
    futexWait(h.doorbell, seen, std::min<std::chrono::nanoseconds>(left, kSlice));
    ready = h.doorbell.load(std::memory_order_relaxed) != seen;
  }
  h.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  if (ready)
    pumpAll();
  else
    failDeadPeers();
}

bool ShmDevice::peerExited(int p) const {
  if (pids_[p] == 0) return false;
  if (pidFds_[p] >= 0) {
    pollfd fd{pidFds_[p], POLLIN, 0};
    return ::poll(&fd, 1, 0) > 0;
  }
  return ::kill(pids_[p], 0) != 0 && errno == ESRCH;
}

std::string ShmDevice::exitedPeer() const {
  for (std::size_t p = 0; p < pids_.size(); ++p)
    if (static_cast<int>(p) != rank_ && peerExited(static_cast<int>(p)))
      return detail::concat("rank ", p, " (shm, pid ", pids_[p], ") exited");
  return "";
}

void ShmDevice::failDeadPeers() {
  for (auto* c : connections_) {
    int p = c->peerRank();
    if (c->idle() || !peerExited(p)) continue;
    c->failAll(std::make_exception_ptr(
        IoError(detail::concat("rank ", rank_, "/", size_, ": rank ", p, " (shm, pid ", pids_[p],
                               ") exited while this rank was exchanging data with it"))));
  }
}

}  // namespace hvd::collectives::shm
