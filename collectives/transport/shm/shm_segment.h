// One rank's shared-memory segment: a POSIX shm object (/dev/shm) holding the rank's doorbell
// and one ring per peer for the bytes that peer sends it. The rank creates it, its local peers
// map it, and the creator unlinks the name once every peer has mapped it, so a crash later
// leaves nothing in /dev/shm.
//
// Layout: SegmentHeader, then for each peer p != owner (in rank order) a RingHeader followed by
// ringBytes of data. The sender p moves `head` (for messages that stream: a whole message is
// announced by its stamp, shm_connection.cc), the owner moves `tail`; both count bytes since the
// start. The fields each side writes sit on their own cache lines.
// Thread model: a Segment object is used by one thread; the shared fields are atomics that other
// processes change at any time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/transport/shm/shm_cleanup.h"  // jobSegmentPrefix, used with Segment::create

namespace hvd::collectives::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the shm transport needs address-free (lock-free) atomics");

inline constexpr std::size_t kCacheLine = 64;

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t rank;
  int32_t size;
  int32_t pid;
  uint64_t ringBytes;
  char pidNamespace[64];  // readlink("/proc/self/ns/pid"): pids compare only within one
  // Bumped by anyone who changed something the owner may be waiting for (data in its rings,
  // space in the rings it writes), and by wake(); a sleeping owner waits on it with a futex.
  alignas(kCacheLine) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;  // owner threads about to sleep or asleep on the doorbell
  alignas(kCacheLine) std::atomic<uint32_t> closed;  // the owner closed its connections
};

struct RingHeader {
  alignas(kCacheLine) std::atomic<uint64_t> head;  // bytes a streaming sender has written
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // bytes consumed by the owner
};

// The pages of one process's mapping that hold a ring (its header and data).
struct RingPages {
  std::byte* begin = nullptr;
  std::size_t bytes = 0;
};

// A ring's pages are taken from /dev/shm when either of its two ranks first uses it, not when the
// segment is made: most pairs of a host's ranks never exchange data (a ring allreduce uses two
// rings per rank, not L-1), and taking every ring's pages at start cost 64 ranks on one host
// about 4 GiB and seconds. Reserves (without SIGBUS if /dev/shm is full: an IoError naming
// `what`) and maps the pages for this process, so the first pass through the ring takes no page
// faults. Where the kernel cannot populate a mapping without SIGBUS (before Linux 5.14) every
// segment is reserved and mapped whole when it is made or opened, and this does nothing.
void prepareRing(const RingPages& pages, std::size_t ringBytes, const std::string& what);

class Segment {
 public:
  // Creates and maps a new segment "/<namePrefix>-<pid>-<random>" for `rank` of `size` with
  // rings of ringBytes, reserving its header and the rings' headers now (so a full /dev/shm is
  // an IoError, not a SIGBUS mid-transfer); a ring's data pages, when first used (prepareRing).
  static Segment create(int rank, int size, std::size_t ringBytes,
                        const std::string& namePrefix = "hvd");
  // Maps, of the segment `name` that rank `expectedRank` of `size` created, its header and the
  // ring that carries `viewer`'s bytes to it, the only parts a peer uses; checks the header.
  // Mapping (and populating) the whole segment in every peer cost L^3 rings' page tables on a
  // host of L ranks, most of a large host's start-up time.
  static Segment open(const std::string& name, int expectedRank, int size, std::size_t ringBytes,
                      int viewer);
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps (and unlinks, if this process created it and has not yet)

  const std::string& name() const { return name_; }
  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  // The ring that carries bytes from `sender` to this segment's owner (in a peer's view, only
  // the viewer's ring).
  RingHeader& ring(int sender) const;
  std::byte* ringData(int sender) const {
    return reinterpret_cast<std::byte*>(&ring(sender)) + sizeof(RingHeader);
  }
  RingPages ringPages(int sender) const;
  std::size_t ringBytes() const { return ringBytes_; }
  void unlink();  // removes the name; mappings stay valid

  static std::size_t bytesFor(int size, std::size_t ringBytes);

 private:
  Segment(std::string name, std::byte* base, std::size_t bytes, int owner, std::size_t ringBytes,
          bool owned);
  std::string name_;
  std::byte* base_ = nullptr;  // the whole segment (its creator), or its header's pages (a peer)
  std::size_t bytes_ = 0;
  // A peer's view: the pages that hold the viewer's ring (ringPages(viewer_)).
  int viewer_ = -1;
  std::byte* viewMap_ = nullptr;
  int owner_ = 0;
  std::size_t ringBytes_ = 0;
  bool linked_ = false;  // this process created the name and has not unlinked it
};

// The ring size of the engine's control links for data rings of ringBytes: they carry
// negotiation messages of a few hundred bytes (a ring streams anything larger through), so
// 64 KiB at most.
constexpr std::size_t controlRingBytes(std::size_t ringBytes) {
  return ringBytes < 64 * 1024 ? ringBytes : 64 * 1024;
}

// This process's pid namespace ("pid:[4026531836]"), or "" when /proc does not say.
std::string pidNamespace();

}  // namespace hvd::collectives::shm
