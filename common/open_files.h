// The open-file limit (ulimit -n) a process needs for a job's links and streams. Linux starts
// most sessions with a soft limit of 1,024 (kept low for programs that still use select()) under
// a much higher hard limit. A job's ranks hold a socket per peer (rank 0 two: its control links
// form a star around it), and hvdrun a pipe or socket pair per rank's stream and a rendezvous
// connection per rank, so past a few hundred ranks the soft limit runs out: connections then
// wait in the kernel until a handshake timeout fails the job with no word about the limit.
// Each raises its soft limit to what the job needs, as far as the hard limit allows, and fails
// at once, saying what to raise, where the hard limit is too low.
// Thread-safety: changes the process's limit; call before the threads that open files start.
#pragma once

#include <cstddef>
#include <string>

namespace hvd {

// Descriptors left to the process beyond what it counts (its own files and pipes, the
// rendezvous client, logs, a framework's files). io::HandshakeListener keeps as many free.
inline constexpr std::size_t kOpenFilesKept = 64;

struct OpenFilesLimit {
  std::size_t before = 0;  // the soft limit found (SIZE_MAX: unlimited)
  std::size_t after = 0;   // the soft limit now
  bool raised() const { return after > before; }
};

// Makes the soft limit at least `needed` (never lowers it). Throws InvalidArgument, "<who>:
// <what> needs about N open files, but the hard limit (ulimit -Hn) is H ...: raise it ..."
// (no "<who>: " when empty), when the hard limit is lower, and IoError when the limit cannot be
// read or set.
OpenFilesLimit ensureOpenFiles(std::size_t needed, const std::string& who, const std::string& what);

// Descriptors a rank's links take in a job of `size` ranks: a socket per peer on the global
// communicator, and the engine's control star (rank 0 one per peer, the others one).
std::size_t rankLinkFiles(int rank, int size);

// Descriptors hvdrun holds per rank it starts: its stdout and stderr (a pipe's read end, or a
// socket pair's two ends for a remote rank), and its connection to the rendezvous server.
inline constexpr std::size_t kLauncherFilesPerRank = 5;

}  // namespace hvd
