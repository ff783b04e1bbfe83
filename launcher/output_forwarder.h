// Forwards workers' output: bytes arrive in arbitrary pieces, and each complete line is written
// to the console as one write(2) of "[rank]<stdout>:line\n" (or <stderr>), so lines of different
// ranks never interleave mid-line. A line still open when its stream ends is completed with a
// newline. A carriage return not followed by a newline (tqdm's and pip's progress bars redraw
// their line so) ends a segment too, forwarded as "[rank]<stderr>:segment\r": the bar moves on
// the console while it runs, instead of arriving whole when the line finally ends. With an
// output directory, each rank's raw streams also go to DIR/rank.NN/{stdout,stderr}. With
// timestamps (--prefix-timestamp), each console line starts with the local date and time it
// was forwarded at, "2026-11-23 10:15:02.123 [rank]<stdout>:line". The last lines of each
// rank's stderr are kept for the failure summary. A file that cannot be written (a full disk)
// is said once on the console's stderr and given up; the console gets every line regardless.
// Thread model: one thread (the launcher's event loop) calls everything.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hvd::launcher {

enum class Stream { Stdout = 0, Stderr = 1 };

class OutputForwarder {
 public:
  // consoleOut/consoleErr are file descriptors; outputDir may be empty. Throws InvalidArgument if
  // the output directory cannot be created.
  OutputForwarder(int numRanks, int consoleOut, int consoleErr, const std::string& outputDir,
                  bool timestampLines = false);
  ~OutputForwarder();

  // One more stream pair (an elastic job's new worker); returns its number.
  int addRank();

  void onData(int rank, Stream stream, const char* data, std::size_t size);
  void onEnd(int rank, Stream stream);
  std::vector<std::string> lastStderrLines(int rank) const;

  static constexpr std::size_t kKeptStderrLines = 10;
  // A line longer than this is forwarded in pieces rather than buffered without bound.
  static constexpr std::size_t kMaxLineBytes = 64 * 1024;

 private:
  struct RankStreams {
    std::string pending[2];
    int fileFd[2] = {-1, -1};  // -1 also once a write failed (said once on the console)
    std::string filePath[2];
    std::deque<std::string> lastStderr;
    bool lastStderrRedrawn = false;  // the newest kept line ended with '\r'
  };
  // `end` is '\n' for a line, '\r' for a segment a progress bar will redraw.
  void emitLine(int rank, Stream stream, const std::string& line, char end = '\n');

  std::deque<RankStreams> ranks_;  // grows without moving the streams
  int consoleFd_[2];
  bool timestampLines_;
  std::string outputDir_;
  int dirWidthRanks_;  // the directory names' digits fit this many ranks
};

}  // namespace hvd::launcher
