#include "launcher/output_forwarder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "common/error.h"

namespace hvd::launcher {
namespace {

// 0, or the errno of the write that failed (ENOSPC where a write takes no byte).
int writeFully(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

// "2026-11-23 10:15:02.123 ", the local time as hvd's log lines show it.
std::string localTimestamp() {
  auto now = std::chrono::system_clock::now();
  std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[40];
  std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(text + n, sizeof text - n, ".%03d ", static_cast<int>(millis.count()));
  return text;
}

std::string rankDirName(int rank, int numRanks) {
  int width = std::max<int>(2, static_cast<int>(std::to_string(numRanks - 1).size()));
  std::string digits = std::to_string(rank);
  return "rank." + std::string(width - std::min<int>(width, digits.size()), '0') + digits;
}

}  // namespace

OutputForwarder::OutputForwarder(int numRanks, int consoleOut, int consoleErr,
                                 const std::string& outputDir, bool timestampLines)
    : consoleFd_{consoleOut, consoleErr},
      timestampLines_(timestampLines),
      outputDir_(outputDir),
      dirWidthRanks_(numRanks) {
  for (int r = 0; r < numRanks; ++r) addRank();
}

int OutputForwarder::addRank() {
  int r = static_cast<int>(ranks_.size());
  ranks_.emplace_back();
  if (outputDir_.empty()) return r;
  std::filesystem::path dir =
      std::filesystem::path(outputDir_) / rankDirName(r, std::max(dirWidthRanks_, r + 1));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw InvalidArgument("--output-filename: cannot create " + dir.string() + ": " + ec.message());
  const char* names[2] = {"stdout", "stderr"};
  for (int s = 0; s < 2; ++s) {
    std::string path = (dir / names[s]).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw InvalidArgument("--output-filename: cannot open " + path + ": " + std::strerror(errno));
    ranks_[r].fileFd[s] = fd;
    ranks_[r].filePath[s] = path;
  }
  return r;
}

OutputForwarder::~OutputForwarder() {
  for (auto& r : ranks_)
    for (int fd : r.fileFd)
      if (fd >= 0) ::close(fd);
}

void OutputForwarder::onData(int rank, Stream stream, const char* data, std::size_t size) {
  RankStreams& rs = ranks_.at(rank);
  int s = static_cast<int>(stream);
  if (rs.fileFd[s] >= 0) {
    if (int err = writeFully(rs.fileFd[s], data, size)) {
      // A full disk, a quota, an I/O error: said once, and the file is given up; the console
      // still gets every line.
      std::string warning = detail::concat(
          "hvdrun: --output-filename: cannot write ", rs.filePath[s], ": ", std::strerror(err),
          "; rank ", rank, "'s ", stream == Stream::Stdout ? "stdout" : "stderr",
          " goes on to this console only\n");
      writeFully(consoleFd_[1], warning.data(), warning.size());
      ::close(rs.fileFd[s]);
      rs.fileFd[s] = -1;
    }
  }
  std::string& pending = rs.pending[s];
  pending.append(data, size);
  std::size_t start = 0;
  for (;;) {
    std::size_t end = pending.find_first_of("\r\n", start);
    if (end == std::string::npos) break;
    if (pending[end] == '\r') {
      // "\r\n" ends a line as before (the '\r' kept in it); a trailing '\r' waits for the
      // next byte to tell which it is.
      if (end + 1 == pending.size()) break;
      if (pending[end + 1] != '\n') {
        if (end > start) emitLine(rank, stream, pending.substr(start, end - start), '\r');
        start = end + 1;
        continue;
      }
      ++end;
    }
    emitLine(rank, stream, pending.substr(start, end - start));
    start = end + 1;
  }
  pending.erase(0, start);
  while (pending.size() >= kMaxLineBytes) {
    emitLine(rank, stream, pending.substr(0, kMaxLineBytes));
    pending.erase(0, kMaxLineBytes);
  }
}

void OutputForwarder::onEnd(int rank, Stream stream) {
  std::string& pending = ranks_.at(rank).pending[static_cast<int>(stream)];
  // A redraw left last on the line ends it: the bar's final state stays on the console.
  if (!pending.empty() && pending.back() == '\r') pending.pop_back();
  if (!pending.empty()) emitLine(rank, stream, pending);
  pending.clear();
}

void OutputForwarder::emitLine(int rank, Stream stream, const std::string& line, char end) {
  std::string out;
  out.reserve(line.size() + 48);
  if (timestampLines_) out = localTimestamp();
  out.append("[").append(std::to_string(rank)).append("]");
  out.append(stream == Stream::Stdout ? "<stdout>:" : "<stderr>:").append(line);
  out.push_back(end);
  // A console that is gone (a closed pipe) leaves nothing useful to do.
  writeFully(consoleFd_[static_cast<int>(stream)], out.data(), out.size());
  if (stream == Stream::Stderr) {
    RankStreams& rs = ranks_[rank];
    // A redrawn segment replaces the one it redraws, so a progress bar's updates do not push
    // the lines that explain a failure out of the summary.
    if (rs.lastStderrRedrawn && !rs.lastStderr.empty()) rs.lastStderr.pop_back();
    rs.lastStderr.push_back(line);
    rs.lastStderrRedrawn = end == '\r';
    if (rs.lastStderr.size() > kKeptStderrLines) rs.lastStderr.pop_front();
  }
}

std::vector<std::string> OutputForwarder::lastStderrLines(int rank) const {
  const auto& last = ranks_.at(rank).lastStderr;
  return {last.begin(), last.end()};
}

}  // namespace hvd::launcher
