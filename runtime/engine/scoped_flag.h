// Sets a flag for the life of a scope (flags that say what the engine thread is inside).
#pragma once

namespace hvd::runtime {

struct ScopedFlag {
  bool& flag;
  explicit ScopedFlag(bool& f) : flag(f) { flag = true; }
  ~ScopedFlag() { flag = false; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;
};

}  // namespace hvd::runtime
