#include "collectives/transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <utility>

#include "common/error.h"

// Linux 5.14's; glibc declares it from 2.35 on. Where the kernel lacks it, madvise says EINVAL.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace hvd::collectives::shm {
namespace {

constexpr uint64_t kMagic = 0x6876642d73686d31;  // "hvd-shm1"
// 2: rings are taken when first used, so a segment may be sparse; a version-1 peer would map it
// as if every page were reserved. 3: a message is announced by its stamp (shm_connection.cc).
constexpr uint32_t kVersion = 3;

std::size_t ringStride(std::size_t ringBytes) { return sizeof(RingHeader) + ringBytes; }

// Where the ring from `sender` starts in the segment of `owner`.
std::size_t ringOffset(int owner, int sender, std::size_t ringBytes) {
  auto slot = static_cast<std::size_t>(sender < owner ? sender : sender - 1);
  return sizeof(SegmentHeader) + slot * ringStride(ringBytes);
}

std::size_t pageBytes() {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// The bytes of `owner`'s segment from the start of the page where the ring from `sender` begins
// to the ring's end: what a peer maps of it, and what prepareRing takes.
struct Span {
  std::size_t begin, end;
};
Span ringSpan(int owner, int sender, std::size_t ringBytes) {
  std::size_t offset = ringOffset(owner, sender, ringBytes);
  return {offset / pageBytes() * pageBytes(), offset + ringStride(ringBytes)};
}

// Whether this kernel populates a mapping's pages on request, failing instead of raising SIGBUS
// where they cannot be had (MADV_POPULATE_WRITE, Linux 5.14). Only EINVAL (an unknown advice)
// says no: every rank of a host must decide alike, since a rank that took the segments for
// reserved whole would write into a sparse one unprepared.
bool lazyRings() {
  static const bool supported = [] {
    std::size_t page = pageBytes();
    void* probe = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED) return true;  // the kernel's answer is unknown; 5.14 is from 2021
    bool unknown = ::madvise(probe, page, MADV_POPULATE_WRITE) != 0 && errno == EINVAL;
    ::munmap(probe, page);
    return !unknown;
  }();
  return supported;
}

// Populated now (MAP_POPULATE) where rings are not prepared lazily: otherwise the first pass of
// messages through a ring takes a page fault per 4 KiB on each side, which more than doubles
// a small allreduce's time.
void* mapShared(int fd, std::size_t bytes, std::size_t offset) {
  return ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                MAP_SHARED | (lazyRings() ? 0 : MAP_POPULATE), fd, static_cast<off_t>(offset));
}

// posix_fallocate's error, or 0.
int reserve(int fd, std::size_t offset, std::size_t bytes) {
  return ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
}

std::string randomName(const std::string& prefix) {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return detail::concat("/", prefix, "-", getpid(), "-", text);
}

std::string systemError(const std::string& what, int error) {
  return what + ": " + std::strerror(error);
}

}  // namespace

std::size_t jobBytesOnHost(int localRanks, std::size_t ringBytes) {
  if (localRanks < 2) return 0;
  return static_cast<std::size_t>(localRanks) *
         (Segment::bytesFor(localRanks, ringBytes) +
          Segment::bytesFor(localRanks, controlRingBytes(ringBytes)));
}

std::string jobSegmentPrefix(const std::string& jobId) {
  std::string prefix = "hvd-";
  for (char ch : jobId)
    if (std::isalnum(static_cast<unsigned char>(ch))) prefix += ch;
  return prefix;
}

int removeSegments(const std::string& prefix) {
  int removed = 0;
  std::string start = prefix + "-";
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (auto* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.rfind(start, 0) == 0 && ::shm_unlink(("/" + name).c_str()) == 0) ++removed;
    }
    ::closedir(dir);
  }
  return removed;
}

void prepareRing(const RingPages& pages, std::size_t ringBytes, const std::string& what) {
  if (!lazyRings() || pages.bytes == 0) return;
  if (::madvise(pages.begin, pages.bytes, MADV_POPULATE_WRITE) != 0) {
    int error = errno;
    // EFAULT: a page could not be had, where touching it would have raised SIGBUS.
    throw IoError(detail::concat(
        what, ": /dev/shm has no room for the ", ringBytes >> 10, " KiB ring between them (",
        error == EFAULT ? std::string("it is full") : std::string(std::strerror(error)),
        "): free space in /dev/shm (a container's is often 64 MiB: docker run --shm-size), or "
        "lower HVD_SHM_BUFFER_BYTES"));
  }
}

std::string pidNamespace() {
  char target[64] = {};
  ssize_t n = ::readlink("/proc/self/ns/pid", target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

std::size_t Segment::bytesFor(int size, std::size_t ringBytes) {
  static_assert(sizeof(SegmentHeader) % kCacheLine == 0 && sizeof(RingHeader) % kCacheLine == 0);
  return sizeof(SegmentHeader) + static_cast<std::size_t>(size - 1) * ringStride(ringBytes);
}

Segment::Segment(std::string name, std::byte* base, std::size_t bytes, int owner,
                 std::size_t ringBytes, bool owned)
    : name_(std::move(name)),
      base_(base),
      bytes_(bytes),
      owner_(owner),
      ringBytes_(ringBytes),
      linked_(owned) {}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this == &other) return *this;
  this->~Segment();
  name_ = std::move(other.name_);
  base_ = std::exchange(other.base_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  viewer_ = std::exchange(other.viewer_, -1);
  viewMap_ = std::exchange(other.viewMap_, nullptr);
  owner_ = other.owner_;
  ringBytes_ = other.ringBytes_;
  linked_ = std::exchange(other.linked_, false);
  return *this;
}

Segment::~Segment() {
  unlink();
  if (base_) ::munmap(base_, bytes_);
  if (viewMap_) ::munmap(viewMap_, ringPages(viewer_).bytes);
  base_ = nullptr;
  viewMap_ = nullptr;
}

void Segment::unlink() {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

RingHeader& Segment::ring(int sender) const {
  HVD_ENFORCE(sender != owner_, "shm: rank ", owner_, " has no ring from itself");
  // ringPages begins at the start of the ring's first page.
  return *reinterpret_cast<RingHeader*>(ringPages(sender).begin +
                                        ringOffset(owner_, sender, ringBytes_) % pageBytes());
}

RingPages Segment::ringPages(int sender) const {
  HVD_ENFORCE(viewer_ < 0 || sender == viewer_, "shm: rank ", viewer_, "'s view of rank ", owner_,
              "'s segment has no ring from rank ", sender);
  Span span = ringSpan(owner_, sender, ringBytes_);
  return {viewer_ >= 0 ? viewMap_ : base_ + span.begin, span.end - span.begin};
}

Segment Segment::create(int rank, int size, std::size_t ringBytes, const std::string& namePrefix) {
  HVD_ENFORCE(ringBytes % kCacheLine == 0, "shm: ring bytes ", ringBytes, " not a multiple of ",
              kCacheLine);
  std::size_t bytes = bytesFor(size, ringBytes);
  std::string name = randomName(namePrefix);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, S_IRUSR | S_IWUSR);
  if (fd < 0) throw IoError(systemError("shm: cannot create " + name, errno));
  auto fail = [&](const std::string& message) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw IoError(message);
  };
  // Reserve the pages written now (a tmpfs that runs out later would kill the process with
  // SIGBUS): all of them where rings cannot be prepared lazily.
  int error = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (error == 0 && !lazyRings()) error = reserve(fd, 0, bytes);
  // Rings taken lazily must still fit, all of them, as they did when each rank reserved its
  // segment whole: a job whose host cannot hold them fails here (HVD_TRANSPORT=auto then moves
  // it to TCP), not at some later first use.
  // (A tmpfs without a size limit reports no blocks at all.)
  struct statvfs space {};
  std::size_t need = static_cast<std::size_t>(size) * bytes;
  if (error == 0 && lazyRings() && ::fstatvfs(fd, &space) == 0 && space.f_blocks > 0 &&
      static_cast<std::size_t>(space.f_bavail) * space.f_frsize < need)
    fail(detail::concat("shm: /dev/shm has ",
                        (static_cast<std::size_t>(space.f_bavail) * space.f_frsize) >> 20,
                        " MiB free, and the ", size, " ranks of this host may need ",
                        (need + (1 << 20) - 1) >> 20, " MiB for their rings of ", ringBytes >> 10,
                        " KiB (free space in /dev/shm, or lower HVD_SHM_BUFFER_BYTES)"));
  if (error == 0) error = reserve(fd, 0, sizeof(SegmentHeader));
  for (int p = 0; p < size && error == 0; ++p)
    if (p != rank) error = reserve(fd, ringOffset(rank, p, ringBytes), sizeof(RingHeader));
  if (error != 0)
    fail(detail::concat(
        "shm: cannot reserve ",
        lazyRings() ? std::string("the headers of a segment") : detail::concat(bytes >> 20, " MiB"),
        " in /dev/shm for ", size - 1, " rings of ", ringBytes >> 10, " KiB: ",
        std::strerror(error), " (free space in /dev/shm, or lower HVD_SHM_BUFFER_BYTES)"));
  void* base = mapShared(fd, bytes, 0);
  error = errno;
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw IoError(systemError("shm: cannot map " + name, error));
  }
  Segment segment(name, static_cast<std::byte*>(base), bytes, rank, ringBytes, true);
  auto* header = new (base) SegmentHeader{};
  header->rank = rank;
  header->size = size;
  header->pid = static_cast<int32_t>(getpid());
  header->ringBytes = ringBytes;
  std::string ns = pidNamespace();
  std::strncpy(header->pidNamespace, ns.c_str(), sizeof header->pidNamespace - 1);
  for (int p = 0; p < size; ++p)
    if (p != rank) new (&segment.ring(p)) RingHeader{};
  // Peers check the magic last: it says the rest is written.
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
  header->version = kVersion;
  return segment;
}

Segment Segment::open(const std::string& name, int expectedRank, int size, std::size_t ringBytes,
                      int viewer) {
  HVD_ENFORCE(viewer >= 0 && viewer < size && viewer != expectedRank, "shm: rank ", viewer,
              " cannot view rank ", expectedRank, "/", size, "'s segment");
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0)
    throw IoError(systemError(
        detail::concat("shm: cannot open rank ", expectedRank, "'s segment ", name), errno));
  std::size_t bytes = bytesFor(size, ringBytes);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || static_cast<std::size_t>(info.st_size) != bytes) {
    ::close(fd);
    throw IoError(detail::concat("shm: rank ", expectedRank, "'s segment ", name, " holds ",
                                 info.st_size, " bytes, expected ", bytes,
                                 " (do all ranks use the same HVD_SHM_BUFFER_BYTES?)"));
  }
  std::size_t headerBytes = sizeof(SegmentHeader);
  Span span = ringSpan(expectedRank, viewer, ringBytes);
  void* base = mapShared(fd, headerBytes, 0);
  int error = errno;
  void* view = base == MAP_FAILED ? MAP_FAILED : mapShared(fd, span.end - span.begin, span.begin);
  if (view == MAP_FAILED && base != MAP_FAILED) {
    error = errno;
    ::munmap(base, headerBytes);
    base = MAP_FAILED;
  }
  ::close(fd);
  if (base == MAP_FAILED) throw IoError(systemError("shm: cannot map " + name, error));
  Segment segment(name, static_cast<std::byte*>(base), headerBytes, expectedRank, ringBytes, false);
  segment.viewer_ = viewer;
  segment.viewMap_ = static_cast<std::byte*>(view);
  std::atomic_thread_fence(std::memory_order_acquire);
  const auto& h = segment.header();
  if (h.magic != kMagic || h.version != kVersion || h.rank != expectedRank || h.size != size ||
      h.ringBytes != ringBytes)
    throw IoError(detail::concat("shm: ", name, " is not rank ", expectedRank, "/", size,
                                 "'s segment of this version (rank ", h.rank, "/", h.size,
                                 ", version ", h.version, ")"));
  return segment;
}

}  // namespace hvd::collectives::shm
