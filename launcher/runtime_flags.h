// The runtime's tuning knobs as hvdrun takes them: flags and a JSON config file with the
// sections of Horovod's YAML config file. Both become HVD_* variables for the workers
// (common/params.h declares and documents each one); flags override the file, and the file
// overrides hvdrun's own environment.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace hvd::launcher {

struct RuntimeFlags {
  std::optional<double> fusionThresholdMb;   // --fusion-threshold-mb
  std::optional<double> cycleTimeMs;         // --cycle-time-ms
  std::optional<long long> cacheCapacity;    // --cache-capacity
  std::optional<std::string> timelineFilename;  // --timeline-filename
  bool timelineMarkCycles = false;              // --timeline-mark-cycles
  std::optional<long long> stallWarningSeconds;   // --stall-check-warning-time-seconds
  std::optional<long long> stallShutdownSeconds;  // --stall-check-shutdown-time-seconds
  bool noStallCheck = false;                 // --no-stall-check
  std::optional<std::string> bindTo;         // --bind-to core|none
  std::optional<std::string> transport;      // --transport auto|tcp|shm
  std::optional<std::string> allreduceAlgorithm;  // --allreduce-algorithm auto|ring|...
  std::optional<long long> mallocRetainMb;   // --malloc-retain-mb
  std::optional<std::string> gradientOverlap;  // --gradient-overlap auto|on|off
  std::optional<std::string> checkReplicas;    // --check-replicas off|first|every:N
  std::optional<bool> hierarchicalAllreduce;  // --[no-]hierarchical-allreduce
  std::optional<bool> hierarchicalAllgather;  // --[no-]hierarchical-allgather
  bool autotune = false;                            // --autotune
  std::optional<std::string> autotuneLogFile;       // --autotune-log-file
  std::optional<long long> autotuneWarmupSamples;   // --autotune-warmup-samples
  std::optional<long long> autotuneStepsPerSample;  // --autotune-steps-per-sample
  std::optional<long long> autotuneMaxSamples;      // --autotune-bayes-opt-max-samples
  std::optional<double> autotuneNoise;              // --autotune-gaussian-process-noise
  std::string configFile;                    // --config-file
};

// The HVD_* variables the flags and the file set. Throws InvalidArgument naming the file and
// key (an unknown or unsupported key, a value of the wrong type) or the flag.
std::map<std::string, std::string> runtimeParams(const RuntimeFlags& flags);

}  // namespace hvd::launcher
