#include "runtime/engine/autotuner.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/format.h"

namespace hvd::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Coordinates on a log scale, so that the grid's values sit roughly evenly in [0,1]: going from
// 1 to 2 MiB matters about as much as from 64 to 128 MiB.
double logCoordinate(double value, double unit, double top) {
  double c = std::log2(1.0 + value / unit) / std::log2(1.0 + top / unit);
  return std::clamp(c, 0.0, 1.0);
}

// The engine names unnamed operations "<op>.noname.<n>" with n counting up, so their names
// never come round again; they count as one name per operation type.
std::string_view stepKey(std::string_view name) {
  auto pos = name.find(".noname.");
  return pos == std::string_view::npos ? name : name.substr(0, pos);
}

std::size_t spreadSamplesFor(const AutotuneOptions& o) {
  return 1 + 2 * static_cast<std::size_t>(o.tuneFusion + o.tuneCycleTime);
}

}  // namespace

const std::vector<std::size_t>& Autotuner::fusionThresholdGrid() {
  static const std::vector<std::size_t> grid{0,         1 * kMiB,  2 * kMiB,  4 * kMiB,  8 * kMiB,
                                             16 * kMiB, 32 * kMiB, 64 * kMiB, 128 * kMiB};
  return grid;
}

const std::vector<microseconds>& Autotuner::cycleTimeGrid() {
  static const std::vector<microseconds> grid{
      microseconds(0),    microseconds(100),  microseconds(200), microseconds(500),
      microseconds(1000), microseconds(2000), microseconds(5000)};
  return grid;
}

SearchPoint Autotuner::coordinates(const TuningParams& p) const {
  SearchPoint x;
  if (options_.tuneFusion)
    x.push_back(logCoordinate(static_cast<double>(p.fusionThresholdBytes), 512.0 * 1024,
                              static_cast<double>(fusionThresholdGrid().back())));
  if (options_.tuneCycleTime)
    x.push_back(logCoordinate(static_cast<double>(p.cycleTime.count()), 50.0,
                              static_cast<double>(cycleTimeGrid().back().count())));
  return x;
}

namespace {

std::vector<TuningParams> gridOf(const AutotuneOptions& o, const TuningParams& configured) {
  std::vector<std::size_t> fusion{configured.fusionThresholdBytes};
  std::vector<microseconds> cycle{configured.cycleTime};
  if (o.tuneFusion) fusion = Autotuner::fusionThresholdGrid();
  if (o.tuneCycleTime) cycle = Autotuner::cycleTimeGrid();
  std::vector<TuningParams> out;
  for (auto f : fusion)
    for (auto c : cycle) out.push_back({f, c});
  return out;
}

}  // namespace

Autotuner::Autotuner(AutotuneOptions options, TuningParams configured)
    : options_(options),
      configured_(configured),
      current_(configured),
      candidates_(gridOf(options, configured)),
      search_(
          [&] {
            std::vector<SearchPoint> points;
            for (const auto& c : candidates_) points.push_back(coordinates(c));
            return points;
          }(),
          options.noise, spreadSamplesFor(options)) {
  HVD_ENFORCE(options_.tuneFusion || options_.tuneCycleTime, "autotune with nothing to tune");
  HVD_ENFORCE(options_.stepsPerSample > 0 && options_.maxSamples > 0,
              "autotune needs at least one step per sample and one sample");
}

Autotuner::Outcome Autotuner::observe(
    const std::vector<std::pair<std::string_view, uint64_t>>& executed, Clock::time_point now) {
  Outcome out;
  for (const auto& [name, bytes] : executed) {
    if (done_) break;
    if (!sampling_) {
      sampling_ = true;
      sampleStart_ = now;
    }
    std::string_view key = stepKey(name);
    auto it = stepsSeen_.find(key);
    if (it == stepsSeen_.end()) it = stepsSeen_.emplace(std::string(key), 0).first;
    if (it->second == options_.stepsPerSample) {
      // This operation opens the step after the sample's last one.
      finishSample(now, out);
      if (done_) break;
      stepsSeen_.emplace(std::string(key), 1);
    } else {
      ++it->second;
    }
    sampleBytes_ += bytes;
  }
  return out;
}

void Autotuner::finishSample(Clock::time_point now, Outcome& out) {
  AutotuneSample s;
  s.index = ++samplesTaken_;
  s.params = current_;
  s.steps = options_.stepsPerSample;
  s.seconds = std::chrono::duration<double>(now - sampleStart_).count();
  s.bytes = sampleBytes_;
  s.score = s.seconds > 0 ? static_cast<double>(s.bytes) / s.seconds : 0.0;
  stepsSeen_.clear();
  sampleBytes_ = 0;
  sampleStart_ = now;
  TuningParams before = current_;
  if (samplesTaken_ <= options_.warmupSamples) {
    s.phase = "warmup";
    out.finished.push_back(s);
    return;
  }
  s.phase = "search";
  out.finished.push_back(s);
  search_.add(coordinates(current_), s.score);
  measured_.push_back(current_);
  scores_.push_back(s.score);
  if (static_cast<int>(search_.samples()) < options_.maxSamples) {
    current_ = candidates_[search_.next()];
  } else {
    // The configured setting was the first search sample; it stays unless clearly beaten.
    current_ = measured_[search_.best(0)];
    done_ = true;
    AutotuneSample chosen;
    chosen.index = samplesTaken_;
    chosen.phase = "chosen";
    chosen.params = current_;
    int n = 0;
    for (std::size_t i = 0; i < measured_.size(); ++i) {
      if (!(measured_[i] == current_)) continue;
      chosen.score += scores_[i];
      ++n;
    }
    chosen.score /= std::max(n, 1);
    out.finished.push_back(chosen);
  }
  out.retuned |= !(current_ == before);
}

void AutotuneLog::open(const std::string& path) {
  path_ = path;
  out_.open(path, std::ios::app);
  if (!out_)
    throw IoError(detail::concat("autotune log: cannot open ", path,
                                 " (HVD_AUTOTUNE_LOG): ", std::strerror(errno)));
  out_ << "sample,phase,fusion_threshold_bytes,cycle_time_ms,steps,seconds,bytes,"
          "score_bytes_per_second\n"
       << std::flush;
}

void AutotuneLog::write(const AutotuneSample& s) {
  if (!out_.is_open()) return;
  out_ << s.index << ',' << s.phase << ',' << s.params.fusionThresholdBytes << ','
       << static_cast<double>(s.params.cycleTime.count()) / 1000.0 << ',' << s.steps << ','
       << s.seconds << ',' << s.bytes << ',' << s.score << '\n'
       << std::flush;
}

AutotuneSession::AutotuneSession(AutotuneOptions options, TuningParams configured,
                                 std::shared_ptr<spdlog::logger> log)
    : tuner_(options, configured), log_(std::move(log)) {
  if (!options.logPath.empty()) csv_.open(options.logPath);
}

std::optional<TuningParams> AutotuneSession::observe(
    const ResponseList& list, const std::function<uint64_t(const std::string&)>& bytesOf,
    std::chrono::steady_clock::time_point now) {
  std::vector<std::pair<std::string_view, uint64_t>> executed;
  for (const auto& r : list.responses) {
    if (r.kind != ResponseKind::Execute) continue;
    for (const auto& name : r.names) executed.emplace_back(name, bytesOf(name));
  }
  auto outcome = tuner_.observe(executed, now);
  for (const auto& sample : outcome.finished) {
    csv_.write(sample);
    ++samples_;
    if (sample.phase == "chosen")
      log_->info("autotune: chose fusion threshold {} bytes and cycle time {} ms ({:.1f} MB/s)",
                 sample.params.fusionThresholdBytes, sample.params.cycleTime.count() / 1000.0,
                 sample.score / 1e6);
  }
  if (!outcome.retuned) return std::nullopt;
  return tuner_.current();
}

}  // namespace hvd::runtime
