// The computation a collective does between its messages (reductions), reported to a meter that
// a simulated transport installs on its thread to turn bytes into virtual time. Real transports
// install none, and a report then costs one thread-local load.
// Thread model: a meter belongs to the thread that installed it.
#pragma once

#include <cstddef>

namespace hvd::collectives {

class WorkMeter {
 public:
  virtual ~WorkMeter() = default;
  // `bytes` of output were just reduced (or scaled). Returns true when the caller should skip
  // the arithmetic: a simulation that moves no data times the work without doing it.
  virtual bool reduced(std::size_t bytes) = 0;
};

// This thread's meter, or null.
WorkMeter* workMeter();

// Installs a meter on this thread for its lifetime (not nested).
class ScopedWorkMeter {
 public:
  explicit ScopedWorkMeter(WorkMeter* meter);
  ~ScopedWorkMeter();
  ScopedWorkMeter(const ScopedWorkMeter&) = delete;
  ScopedWorkMeter& operator=(const ScopedWorkMeter&) = delete;

 private:
  WorkMeter* previous_;
};

// For the reduction kernels: reports the work and says whether to skip it.
inline bool skipReduction(std::size_t bytes) {
  WorkMeter* meter = workMeter();
  return meter && meter->reduced(bytes);
}

}  // namespace hvd::collectives
