#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "common/error.h"
#include "common/open_files.h"

using namespace hvd;

namespace {

// Runs `body` in a forked child (setrlimit there cannot touch this process's limits) and
// returns what it wrote on the pipe.
template <typename Body>
std::string inChild(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("threw: ") + e.what();
    }
    [[maybe_unused]] auto n = ::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return got;
}

std::string softLimit() {
  rlimit l{};
  ::getrlimit(RLIMIT_NOFILE, &l);
  return std::to_string(l.rlim_cur);
}

}  // namespace

TEST_CASE("open files: a rank's links, rank 0's control star included") {
  CHECK(rankLinkFiles(0, 1) == 0);
  CHECK(rankLinkFiles(0, 2) == 2);
  CHECK(rankLinkFiles(1, 2) == 2);
  CHECK(rankLinkFiles(0, 1024) == 2046);
  CHECK(rankLinkFiles(5, 1024) == 1024);
}

TEST_CASE("open files: the soft limit is raised to the need, never lowered") {
  std::string out = inChild([] {
    rlimit l{};
    ::getrlimit(RLIMIT_NOFILE, &l);
    if (l.rlim_max != RLIM_INFINITY && l.rlim_max < 512) return std::string("hard limit too low");
    l.rlim_cur = 128;
    ::setrlimit(RLIMIT_NOFILE, &l);
    auto raised = ensureOpenFiles(300, "rank 1/2", "a job");
    std::string s = std::to_string(raised.before) + "->" + std::to_string(raised.after) + " " +
                    softLimit() + " " + (raised.raised() ? "raised" : "kept");
    auto kept = ensureOpenFiles(200, "rank 1/2", "a job");
    return s + "; " + std::to_string(kept.before) + "->" + std::to_string(kept.after) + " " +
           softLimit() + " " + (kept.raised() ? "raised" : "kept");
  });
  CHECK(out == "128->300 300 raised; 300->300 300 kept");
}

TEST_CASE("open files: a hard limit below the need is refused, saying what to raise") {
  std::string out = inChild([] {
    rlimit l{100, 100};
    ::setrlimit(RLIMIT_NOFILE, &l);
    ensureOpenFiles(142, "rank 0/40 on host a", "a job of 40 ranks");
    return std::string("not refused; soft limit ") + softLimit();
  });
  CHECK(out ==
        "threw: rank 0/40 on host a: a job of 40 ranks needs about 142 open files, but the hard "
        "limit (ulimit -Hn) is 100 (soft limit 100): raise it where the job starts (`ulimit -n "
        "142` as root, a nofile line in /etc/security/limits.conf, or LimitNOFILE= for a systemd "
        "service)");
}
