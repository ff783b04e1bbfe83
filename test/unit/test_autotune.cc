// The autotuner's pieces without an engine: the Gaussian process and the Bayesian search on
// known functions, and the autotuner's sampling fed with synthetic training steps.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "runtime/config.h"
#include "runtime/engine/autotuner.h"
#include "runtime/engine/bayesian_search.h"

using namespace hvd::runtime;
using std::chrono::microseconds;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::vector<SearchPoint> grid(int nx, int ny) {
  std::vector<SearchPoint> points;
  for (int i = 0; i < nx; ++i)
    for (int j = 0; j < ny; ++j) points.push_back({i / double(nx - 1), j / double(ny - 1)});
  return points;
}

// One training step of `names`, each `bytes` long, dispatched at `t`.
std::vector<std::pair<std::string_view, uint64_t>> step(const std::vector<std::string>& names,
                                                        uint64_t bytes) {
  std::vector<std::pair<std::string_view, uint64_t>> out;
  for (const auto& n : names) out.emplace_back(n, bytes);
  return out;
}

// Runs a job of one `bytes`-long gradient per step, each step lasting stepSeconds(setting),
// until the tuner is done (at most 1000 steps).
template <typename StepSeconds>
void trainUntilTuned(Autotuner& tuner, uint64_t bytes, StepSeconds stepSeconds) {
  auto t = Clock::time_point{};
  for (int s = 0; s < 1000 && !tuner.done(); ++s) {
    tuner.observe({{"grad", bytes}}, t);
    t += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(stepSeconds(tuner.current())));
  }
}

}  // namespace

TEST_CASE("the Gaussian process interpolates measured scores and is unsure far from them") {
  GaussianProcess gp(1e-6);
  std::vector<SearchPoint> x;
  std::vector<double> y;
  for (double v = 0; v <= 1.0; v += 0.125) {
    x.push_back({v});
    y.push_back(100 + 40 * std::sin(3 * v));
  }
  gp.fit(x, y);
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto p = gp.predict(x[i]);
    CHECK(p.mean == Approx(y[i]).margin(0.5));
    CHECK(p.stddev < 1.0);
  }
  // Between measured points the fit follows the function.
  CHECK(gp.predict({0.3}).mean == Approx(100 + 40 * std::sin(0.9)).margin(2.0));
  // Two measurements close together: sure at them, unsure far away (scores' spread is 1).
  GaussianProcess pair(1e-6);
  pair.fit({{0.0}, {0.1}}, {10.0, 12.0});
  CHECK(pair.predict({0.0}).stddev < 0.05);
  CHECK(pair.predict({1.0}).stddev > 0.3);
}

TEST_CASE("expected improvement grows with the predicted mean and with the uncertainty") {
  CHECK(expectedImprovement(1.0, 0.0, 2.0) == 0.0);
  CHECK(expectedImprovement(3.0, 0.0, 2.0) == Approx(1.0));
  CHECK(expectedImprovement(2.0, 1.0, 2.0) == Approx(1.0 / std::sqrt(2 * M_PI)));
  CHECK(expectedImprovement(2.5, 1.0, 2.0) > expectedImprovement(2.0, 1.0, 2.0));
  CHECK(expectedImprovement(2.0, 2.0, 2.0) > expectedImprovement(2.0, 1.0, 2.0));
}

TEST_CASE("the Bayesian search finds the top of a noisy function in 20 of 63 points") {
  auto candidates = grid(9, 7);
  auto truth = [](const SearchPoint& p) {
    return 1000.0 - 900.0 * ((p[0] - 0.62) * (p[0] - 0.62) + (p[1] - 0.3) * (p[1] - 0.3));
  };
  double top = 0, bottom = 1e9;
  for (const auto& c : candidates) {
    top = std::max(top, truth(c));
    bottom = std::min(bottom, truth(c));
  }
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0.0, 0.03 * (top - bottom));
    BayesianSearch search(candidates, 0.8, 5);
    search.add({1.0, 0.0}, truth({1.0, 0.0}) + noise(rng));  // the configured setting
    std::vector<SearchPoint> measured{{1.0, 0.0}};
    while (search.samples() < 20) {
      std::size_t next = search.next();
      search.add(candidates[next], truth(candidates[next]) + noise(rng));
      measured.push_back(candidates[next]);
    }
    double chosen = truth(measured[search.best()]);
    INFO("seed " << seed << ": chose " << measured[search.best()][0] << ", "
                 << measured[search.best()][1] << " worth " << chosen << " of " << top);
    CHECK(chosen >= top - 0.05 * (top - bottom));
  }
}

TEST_CASE("the incumbent stays unless the best measured point beats it beyond the noise") {
  auto candidates = grid(9, 7);
  for (unsigned seed : {11u, 12u, 13u, 14u, 15u, 16u}) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0.0, 3.0);
    // Flat: every setting scores 100, measured with noise.
    BayesianSearch flat(candidates, 0.8, 5);
    flat.add({1.0, 0.0}, 100 + noise(rng));
    while (flat.samples() < 20) flat.add(candidates[flat.next()], 100 + noise(rng));
    CHECK(flat.best(0) == 0);
    // Sloped: the far corner is clearly better than the incumbent, and wins.
    BayesianSearch sloped(candidates, 0.8, 5);
    auto truth = [](const SearchPoint& p) { return 100 + 30 * p[1] - 30 * (1 - p[0]); };
    SearchPoint incumbent{1.0, 0.0};
    sloped.add(incumbent, truth(incumbent) + noise(rng));
    std::vector<SearchPoint> measured{incumbent};
    while (sloped.samples() < 20) {
      auto next = candidates[sloped.next()];
      sloped.add(next, truth(next) + noise(rng));
      measured.push_back(next);
    }
    CHECK(truth(measured[sloped.best(0)]) > truth(incumbent) + 20);
  }
}

TEST_CASE("the first samples spread over the grid before expected improvement takes over") {
  BayesianSearch search(grid(3, 3), 0.8, 3);
  search.add({0.0, 0.0}, 1.0);
  auto first = search.candidates()[search.next()];
  CHECK(first == SearchPoint{1.0, 1.0});  // the corner farthest from the measured one
  search.add(first, 2.0);
  auto second = search.candidates()[search.next()];
  CHECK((second == SearchPoint{0.0, 1.0} || second == SearchPoint{1.0, 0.0}));
}

TEST_CASE("autotune: warm-up discarded, samples of whole steps, then the best setting stays") {
  AutotuneOptions o = defaultEngineOptions().autotune;
  o.warmupSamples = 1;
  o.stepsPerSample = 2;
  o.maxSamples = 4;
  TuningParams configured{64 * kMiB, microseconds(0)};
  Autotuner tuner(o, configured);
  std::vector<std::string> names{"grad.a", "grad.b", "loss"};
  auto t = Clock::time_point{} + std::chrono::seconds(100);
  std::vector<AutotuneSample> samples;
  int retunes = 0;
  for (int s = 0; s < 40 && !tuner.done(); ++s) {
    auto out = tuner.observe(step(names, 1000), t);
    retunes += out.retuned;
    for (auto& x : out.finished) samples.push_back(x);
    t += std::chrono::milliseconds(10);
  }
  REQUIRE(tuner.done());
  // 1 warm-up + 4 search samples of 2 steps each, then the choice; the sample ends as the step
  // after its last one begins.
  REQUIRE(samples.size() == 6);
  CHECK(samples[0].phase == "warmup");
  CHECK(samples[0].params == configured);
  for (int i = 1; i <= 4; ++i) {
    CHECK(samples[i].phase == "search");
    CHECK(samples[i].index == i + 1);
    CHECK(samples[i].steps == 2);
    CHECK(samples[i].bytes == 2 * 3 * 1000);
    CHECK(samples[i].seconds == Approx(0.020));
    CHECK(samples[i].score == Approx(6000 / 0.020));
  }
  CHECK(samples[1].params == configured);  // the configured setting is measured first
  CHECK_FALSE(samples[2].params == configured);
  CHECK(samples[5].phase == "chosen");
  CHECK(samples[5].params == tuner.current());
  CHECK(retunes >= 1);
  // Finished: later steps change nothing.
  auto after = tuner.observe(step(names, 1000), t);
  CHECK(after.finished.empty());
  CHECK_FALSE(after.retuned);
}

TEST_CASE("autotune: unnamed operations count by type, so their steps still end samples") {
  AutotuneOptions o = defaultEngineOptions().autotune;
  o.warmupSamples = 0;
  o.stepsPerSample = 3;
  o.maxSamples = 2;
  Autotuner tuner(o, {kMiB, microseconds(0)});
  auto t = Clock::time_point{};
  int finished = 0;
  for (int n = 0; n < 10; ++n) {
    std::string name = "allreduce.noname." + std::to_string(n);
    finished += static_cast<int>(tuner.observe({{name, 4}}, t).finished.size());
    t += std::chrono::milliseconds(1);
  }
  CHECK(finished >= 2);
}

TEST_CASE("autotune: a knob the user set stays fixed while the other is searched") {
  AutotuneOptions o = defaultEngineOptions().autotune;
  o.warmupSamples = 0;
  o.stepsPerSample = 1;
  o.maxSamples = 8;
  o.tuneFusion = false;
  TuningParams configured{3 * kMiB, microseconds(0)};
  Autotuner tuner(o, configured);
  std::set<int64_t> cycles;
  auto t = Clock::time_point{};
  for (int s = 0; s < 20 && !tuner.done(); ++s) {
    CHECK(tuner.current().fusionThresholdBytes == 3 * kMiB);
    cycles.insert(tuner.current().cycleTime.count());
    tuner.observe({{"g", 100}}, t);
    t += std::chrono::milliseconds(5);
  }
  CHECK(tuner.done());
  CHECK(cycles.size() >= 3);
  CHECK(tuner.current().fusionThresholdBytes == 3 * kMiB);
}

TEST_CASE("autotune finds the setting a simulated job trains fastest with") {
  // Step time of a simulated job: best at 16 MiB and 0.5 ms, worse away from it, with noise.
  auto stepSeconds = [](const TuningParams& p, double jitter) {
    double f = std::log2(1.0 + p.fusionThresholdBytes / double(kMiB)) - std::log2(17.0);
    double c = std::log2(1.0 + p.cycleTime.count() / 50.0) - std::log2(11.0);
    return 0.050 * (1.0 + 0.04 * f * f + 0.05 * c * c) * (1.0 + jitter);
  };
  auto best = stepSeconds({16 * kMiB, microseconds(500)}, 0);
  for (unsigned seed : {7u, 8u, 9u}) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> jitter(0.0, 0.01);
    AutotuneOptions o = defaultEngineOptions().autotune;
    o.warmupSamples = 1;
    o.stepsPerSample = 5;
    Autotuner tuner(o, {128 * kMiB, microseconds(0)});
    trainUntilTuned(tuner, 4 << 20,
                    [&](const TuningParams& p) { return stepSeconds(p, jitter(rng)); });
    REQUIRE(tuner.done());
    double chosen = stepSeconds(tuner.current(), 0);
    double configured = stepSeconds({128 * kMiB, microseconds(0)}, 0);
    INFO("seed " << seed << ": chose " << tuner.current().fusionThresholdBytes << " bytes, "
                 << tuner.current().cycleTime.count() << " us: " << chosen << " s per step, "
                 << "best " << best << ", configured " << configured);
    CHECK(chosen < configured);
    CHECK(chosen <= best * 1.03);
  }
}

TEST_CASE("autotune keeps the configured setting when no other trains measurably faster") {
  int kept = 0;
  for (unsigned seed = 20; seed < 30; ++seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> jitter(0.0, 0.03);
    AutotuneOptions o = defaultEngineOptions().autotune;
    o.warmupSamples = 0;
    o.stepsPerSample = 5;
    o.maxSamples = 12;
    TuningParams configured{128 * kMiB, microseconds(0)};
    Autotuner tuner(o, configured);
    trainUntilTuned(tuner, 1 << 20, [&](const TuningParams&) { return 0.05 * (1 + jitter(rng)); });
    REQUIRE(tuner.done());
    kept += tuner.current() == configured;
  }
  CHECK(kept >= 9);
}

TEST_CASE("the autotune log is CSV with a header, appended to, and names a file it cannot open") {
  auto dir =
      std::filesystem::temp_directory_path() / ("hvd_autotune_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "autotune.csv").string();
  for (int run = 0; run < 2; ++run) {
    AutotuneLog log;
    log.open(path);
    AutotuneSample s;
    s.index = 1;
    s.phase = "search";
    s.params = {2 * kMiB, microseconds(500)};
    s.steps = 10;
    s.seconds = 0.5;
    s.bytes = 1000;
    s.score = 2000;
    log.write(s);
  }
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] ==
        "sample,phase,fusion_threshold_bytes,cycle_time_ms,steps,seconds,bytes,"
        "score_bytes_per_second");
  CHECK(lines[1] == "1,search,2097152,0.5,10,0.5,1000,2000");
  CHECK(lines[2] == lines[0]);
  std::filesystem::remove_all(dir);
  AutotuneLog bad;
  CHECK_THROWS_WITH(bad.open((dir / "missing" / "x.csv").string()),
                    Catch::Contains("missing/x.csv") && Catch::Contains("HVD_AUTOTUNE_LOG"));
}

TEST_CASE("autotune session: executed responses' bytes, a CSV row per sample, the new setting") {
  AutotuneOptions o = defaultEngineOptions().autotune;
  o.warmupSamples = 0;
  o.stepsPerSample = 1;
  o.maxSamples = 3;
  auto csv = std::filesystem::temp_directory_path() /
             ("hvd_autotune_session_" + std::to_string(::getpid()) + ".csv");
  std::filesystem::remove(csv);
  o.logPath = csv.string();
  AutotuneSession session(o, {kMiB, microseconds(0)}, spdlog::default_logger());
  // Each list: the step's gradient, plus an error response and a name this rank does not hold
  // (a process set without rank 0), which count no bytes.
  ResponseList list;
  Response grad;
  grad.names = {"grad", "other.set"};
  Response refused;
  refused.kind = ResponseKind::Error;
  refused.names = {"bad"};
  list.responses = {grad, refused};
  auto bytesOf = [](const std::string& name) { return name == "grad" ? uint64_t{4096} : 0; };
  auto t = Clock::time_point{};
  int retunes = 0;
  TuningParams last{kMiB, microseconds(0)};
  for (int s = 0; s < 20 && !session.done(); ++s) {
    if (auto tuned = session.observe(list, bytesOf, t)) {
      ++retunes;
      CHECK_FALSE(*tuned == last);  // only a change is handed back
      last = *tuned;
    }
    t += std::chrono::milliseconds(2);
  }
  CHECK(session.done());
  CHECK(retunes >= 1);
  CHECK(session.samples() == 4);  // 3 search samples and the choice
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  CHECK(header.rfind("sample,phase,", 0) == 0);
  std::getline(in, row);
  CHECK_THAT(row, Catch::StartsWith("1,search,1048576,0,1,0.002,4096,"));
  std::filesystem::remove(csv);
}
