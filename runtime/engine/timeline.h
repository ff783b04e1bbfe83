// A Chrome-trace / Perfetto timeline (open it in ui.perfetto.dev or chrome://tracing): one row
// per tensor name, one complete event per phase (NEGOTIATE, MEMCPY_IN_FUSION_BUFFER, the
// collective, MEMCPY_OUT_FUSION_BUFFER), and optionally CYCLE_START marks. The file is valid JSON
// after every write: each batch of events replaces the closing "]" in one pwrite, so a job stopped
// by Ctrl-C or SIGKILL leaves a file that parses. Thread model: start/stop from any thread; record
// from the engine thread; a mutex guards the file.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hvd::runtime {

class Timeline {
 public:
  using Time = std::chrono::steady_clock::time_point;
  explicit Timeline(int rank) : rank_(rank) {}
  ~Timeline();

  // Throws IoError naming the path when it cannot be created. Replaces a running timeline.
  // `markCycles`: the engine marks each list of work it dispatches (markCycle).
  void start(const std::string& path, bool markCycles = false);
  void stop();
  bool active() const;

  struct Event {
    std::string tensor;
    std::string phase;
    Time begin;
    Time end;
    std::size_t bytes = 0;
  };
  void record(const std::vector<Event>& events);
  // An instant event across all rows (Horovod's CYCLE_START): hvd has no fixed cycle, so rank
  // 0's engine marks each list of work it dispatches.
  void markCycle(Time at);
  bool marksCycles() const { return markCycles_; }

 private:
  void append(const std::string& text);
  void closeLocked();

  int rank_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  std::string path_;
  long long end_ = 0;  // file offset of the closing "\n]"
  bool first_ = true;
  Time origin_;
  std::map<std::string, int> rows_;
  std::atomic<bool> markCycles_{false};
};

}  // namespace hvd::runtime
