#include "common/open_files.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace hvd {
namespace {

std::size_t asSize(rlim_t v) { return v == RLIM_INFINITY ? SIZE_MAX : static_cast<std::size_t>(v); }

}  // namespace

OpenFilesLimit ensureOpenFiles(std::size_t needed, const std::string& who,
                               const std::string& what) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    throw IoError(std::string("cannot read the open-file limit: ") + std::strerror(errno));
  OpenFilesLimit out{asSize(limit.rlim_cur), asSize(limit.rlim_cur)};
  if (out.before >= needed) return out;
  if (asSize(limit.rlim_max) < needed)
    throw InvalidArgument(detail::concat(
        who.empty() ? "" : who + ": ", what, " needs about ", needed,
        " open files, but the hard limit (ulimit -Hn) is ", limit.rlim_max, " (soft limit ",
        limit.rlim_cur, "): raise it where the job starts (`ulimit -n ", needed,
        "` as root, a nofile line in /etc/security/limits.conf, or LimitNOFILE= for a systemd "
        "service)"));
  limit.rlim_cur = static_cast<rlim_t>(needed);
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
    throw IoError(detail::concat(who.empty() ? "" : who + ": ",
                                 "cannot raise the open-file limit to ", needed, ": ",
                                 std::strerror(errno)));
  out.after = needed;
  return out;
}

std::size_t rankLinkFiles(int rank, int size) {
  if (size <= 1) return 0;
  auto peers = static_cast<std::size_t>(size - 1);
  return peers + (rank == 0 ? peers : 1);
}

}  // namespace hvd
