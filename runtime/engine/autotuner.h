// Tunes the fusion threshold and the cycle time while a job trains (HVD_AUTOTUNE=1, Horovod's
// autotune). Rank 0's engine runs it: the coordinator alone fuses and holds ready work, and each
// response carries the fusion threshold every rank's executor cuts its chunks with, so a new
// setting needs no agreement between ranks and takes effect at the next dispatch.
//
// Measurement: a sample is `stepsPerSample` training steps under one setting, where a step ends
// when an operation name comes round again (the same gradient's allreduce in the next step;
// unnamed operations count by their type). A sample's score is the bytes of the operations
// dispatched during it per second, which for a training loop is bytes per step over the step
// time. The first `warmupSamples` samples run the configured setting and are discarded (first
// steps allocate, fill caches and warm up the framework). Then `maxSamples` samples: the
// configured setting, a few settings spread over the grid, and then the candidates a Bayesian
// search (bayesian_search.h) expects to improve most. After them the setting with the best
// fitted score stays for the rest of the job, if it beats the configured setting by more than
// the fits' uncertainty (else the configured one stays). A knob the user set explicitly is not
// tuned.
//
// Pure logic: the caller passes the time and writes the samples it returns (AutotuneLog).
// Thread model: owned by rank 0's engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "runtime/engine/bayesian_search.h"
#include "runtime/engine/messages.h"

namespace hvd::runtime {

struct TuningParams {
  std::size_t fusionThresholdBytes = 0;
  std::chrono::microseconds cycleTime{0};
  bool operator==(const TuningParams&) const = default;
};

struct AutotuneOptions {
  // The rows tagged Autotune: enabled, logPath (the CSV; empty: none), warmupSamples,
  // stepsPerSample, maxSamples, noise (a score's noise variance relative to the scores').
#define HVD_OPTION_MEMBERS_OF_Autotune(type, member) type member{};
#include "common/param_option_members.h"
  bool tuneFusion = true;     // false: HVD_FUSION_THRESHOLD was set
  bool tuneCycleTime = true;  // false: HVD_CYCLE_TIME was set
};

struct AutotuneSample {
  int index = 0;      // 1, 2, ... in the order measured, warm-up included
  std::string phase;  // "warmup", "search", or "chosen" (the final setting)
  TuningParams params;
  int steps = 0;
  double seconds = 0;
  uint64_t bytes = 0;
  double score = 0;  // bytes per second; for "chosen", the mean of its samples
};

class Autotuner {
 public:
  Autotuner(AutotuneOptions options, TuningParams configured);

  struct Outcome {
    std::vector<AutotuneSample> finished;  // samples this observation completed, in order
    bool retuned = false;                  // current() changed
  };
  // The operations just dispatched to run, in their order: name and bytes.
  Outcome observe(const std::vector<std::pair<std::string_view, uint64_t>>& executed,
                  std::chrono::steady_clock::time_point now);

  const TuningParams& current() const { return current_; }
  bool done() const { return done_; }

  // The grid searched (a knob the user fixed stays at its value).
  static const std::vector<std::size_t>& fusionThresholdGrid();
  static const std::vector<std::chrono::microseconds>& cycleTimeGrid();

 private:
  SearchPoint coordinates(const TuningParams& p) const;
  void finishSample(std::chrono::steady_clock::time_point now, Outcome& out);

  AutotuneOptions options_;
  TuningParams configured_;
  TuningParams current_;
  std::vector<TuningParams> candidates_;  // parallel to search_.candidates()
  BayesianSearch search_;
  std::vector<TuningParams> measured_;  // parallel to the search's samples
  std::vector<double> scores_;

  bool done_ = false;
  bool sampling_ = false;
  std::chrono::steady_clock::time_point sampleStart_{};
  uint64_t sampleBytes_ = 0;
  int samplesTaken_ = 0;
  std::map<std::string, int, std::less<>> stepsSeen_;  // by step key, in this sample
};

// The CSV file HVD_AUTOTUNE_LOG names: one row per sample, flushed as it is written. Appends,
// with a header row first, so an elastic job's later rounds (each tunes afresh) add to it.
class AutotuneLog {
 public:
  // Throws IoError naming the file when it cannot be opened.
  void open(const std::string& path);
  void write(const AutotuneSample& sample);

 private:
  std::ofstream out_;
  std::string path_;
};

// Rank 0's engine's side of autotuning: every dispatched list's executed operations go to the
// Autotuner, each finished sample to the log, the final choice to the engine's log, and the
// new setting back to the engine for the coordinator.
class AutotuneSession {
 public:
  // Throws IoError when the CSV (options.logPath) cannot be opened.
  AutotuneSession(AutotuneOptions options, TuningParams configured,
                  std::shared_ptr<spdlog::logger> log);

  // `bytesOf(name)`: the bytes of an operation this rank holds; 0 for one it does not (one of
  // a process set without rank 0 counts as a step marker without bytes). Returns the setting
  // to apply when it changed.
  std::optional<TuningParams> observe(const ResponseList& list,
                                      const std::function<uint64_t(const std::string&)>& bytesOf,
                                      std::chrono::steady_clock::time_point now);
  bool done() const { return tuner_.done(); }
  uint64_t samples() const { return samples_; }

 private:
  Autotuner tuner_;
  AutotuneLog csv_;
  std::shared_ptr<spdlog::logger> log_;
  uint64_t samples_ = 0;
};

}  // namespace hvd::runtime
