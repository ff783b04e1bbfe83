#include "runtime/engine/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace hvd::runtime {

Timeline::~Timeline() { stop(); }

void Timeline::start(const std::string& path, bool markCycles) {
  markCycles_ = markCycles;
  std::lock_guard<std::mutex> lock(mutex_);
  closeLocked();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw IoError(detail::concat("timeline: cannot create ", path, ": ", std::strerror(errno)));
  fd_ = fd;
  path_ = path;
  end_ = 1;
  first_ = true;
  rows_.clear();
  origin_ = std::chrono::steady_clock::now();
  if (::pwrite(fd_, "[\n]", 3, 0) != 3)
    throw IoError(detail::concat("timeline: cannot write ", path, ": ", std::strerror(errno)));
}

void Timeline::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  closeLocked();
}

void Timeline::closeLocked() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Timeline::active() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fd_ >= 0;
}

void Timeline::record(const std::vector<Event>& events) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0 || events.empty()) return;
  std::string text;
  auto add = [&](const nlohmann::json& e) {
    text += first_ ? "\n" : ",\n";
    text += e.dump();
    first_ = false;
  };
  for (const auto& e : events) {
    auto [row, fresh] = rows_.try_emplace(e.tensor, static_cast<int>(rows_.size()));
    if (fresh)
      add({{"name", "thread_name"},
           {"ph", "M"},
           {"pid", rank_},
           {"tid", row->second},
           {"args", {{"name", e.tensor}}}});
    auto us = [&](Time t) {
      return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
    };
    add({{"name", e.phase},
         {"ph", "X"},
         {"pid", rank_},
         {"tid", row->second},
         {"ts", us(e.begin)},
         {"dur", us(e.end) - us(e.begin)},
         {"args", {{"tensor", e.tensor}, {"bytes", e.bytes}}}});
  }
  append(text);
}

void Timeline::markCycle(Time at) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(at - origin_).count();
  nlohmann::json e = {{"name", "CYCLE_START"}, {"ph", "i"}, {"s", "g"},
                      {"pid", rank_},          {"tid", 0},  {"ts", us}};
  append((first_ ? "\n" : ",\n") + e.dump());
  first_ = false;
}

// One pwrite replaces the closing bracket, so the file is valid JSON before and after it.
void Timeline::append(const std::string& text) {
  std::string chunk = text + "\n]";
  ssize_t n = ::pwrite(fd_, chunk.data(), chunk.size(), end_);
  if (n != static_cast<ssize_t>(chunk.size())) {
    closeLocked();  // a full disk must not stop training; the log says the timeline ended
    return;
  }
  end_ += static_cast<long long>(text.size());
}

}  // namespace hvd::runtime
