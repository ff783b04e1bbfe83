#include "runtime/engine/bayesian_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace hvd::runtime {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Smooth to rough: on a grid of 5 to 10 values per knob, 0.1 lets neighbours differ and 1.0
// fits nearly a plane. The marginal likelihood picks among these.
constexpr double kLengthScales[] = {0.1, 0.15, 0.25, 0.4, 0.6, 1.0};
// How much of the scores' spread is the settings' doing (the rest is noise): when every
// setting scores the same up to noise, a small one fits best, and the fit stays flat instead
// of chasing lucky samples.
constexpr double kSignalVariances[] = {0.01, 0.05, 0.2, 0.5, 1.0, 2.0};
// A move away from the incumbent must gain this many standard deviations of the two fits'
// combined uncertainty: a lucky run of samples should rarely move a job off its configuration.
constexpr double kKeepIncumbentSigmas = 2.0;
// Keeps the factorisation positive definite when the caller asks for no noise at all.
constexpr double kJitter = 1e-9;
// Expected improvement must beat the best by this share of the scores' range, so that with
// a flat fit the search does not keep re-measuring the incumbent.
constexpr double kMinGain = 0.01;

double squaredDistance(const SearchPoint& a, const SearchPoint& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return d;
}

double kernel(const SearchPoint& a, const SearchPoint& b, double scale, double variance) {
  return variance * std::exp(-squaredDistance(a, b) / (2 * scale * scale));
}

// Solves L z = b for lower-triangular L (row-major n x n).
std::vector<double> forward(const std::vector<double>& lower, std::vector<double> b) {
  std::size_t n = b.size();
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < i; ++k) b[i] -= lower[i * n + k] * b[k];
    b[i] /= lower[i * n + i];
  }
  return b;
}

// Solves L^T z = b.
std::vector<double> backward(const std::vector<double>& lower, std::vector<double> b) {
  std::size_t n = b.size();
  for (std::size_t i = n; i-- > 0;) {
    for (std::size_t k = i + 1; k < n; ++k) b[i] -= lower[k * n + i] * b[k];
    b[i] /= lower[i * n + i];
  }
  return b;
}

}  // namespace

GaussianProcess::GaussianProcess(double noise) : noise_(std::max(noise, 0.0) + kJitter) {}

void GaussianProcess::fit(const std::vector<SearchPoint>& x, const std::vector<double>& y) {
  HVD_ENFORCE(!x.empty() && x.size() == y.size(), "Gaussian process fit of ", x.size(),
              " points and ", y.size(), " scores");
  x_ = x;
  double n = static_cast<double>(y.size());
  yMean_ = 0;
  for (double v : y) yMean_ += v / n;
  double var = 0;
  for (double v : y) var += (v - yMean_) * (v - yMean_) / n;
  yScale_ = var > 0 ? std::sqrt(var) : 1.0;
  if (yScale_ < 1e-12 * std::max(1.0, std::fabs(yMean_))) yScale_ = 1.0;
  y_.clear();
  for (double v : y) y_.push_back((v - yMean_) / yScale_);
  double bestScale = kLengthScales[0], bestVariance = kSignalVariances[0];
  double bestLikelihood = -std::numeric_limits<double>::infinity();
  for (double scale : kLengthScales) {
    for (double variance : kSignalVariances) {
      double l = factorise(scale, variance);
      if (l > bestLikelihood) {
        bestLikelihood = l;
        bestScale = scale;
        bestVariance = variance;
      }
    }
  }
  factorise(bestScale, bestVariance);
}

double GaussianProcess::factorise(double scale, double variance) {
  lengthScale_ = scale;
  signalVariance_ = variance;
  std::size_t n = x_.size();
  lower_.assign(n * n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j <= i; ++j) {
      double sum = kernel(x_[i], x_[j], scale, variance) + (i == j ? noise_ : 0.0);
      for (std::size_t k = 0; k < j; ++k) sum -= lower_[i * n + k] * lower_[j * n + k];
      if (i == j)
        lower_[i * n + i] = std::sqrt(std::max(sum, kJitter));
      else
        lower_[i * n + j] = sum / lower_[j * n + j];
    }
  }
  alpha_ = backward(lower_, forward(lower_, y_));
  double likelihood = -0.5 * static_cast<double>(n) * std::log(2 * kPi);
  for (std::size_t i = 0; i < n; ++i)
    likelihood -= 0.5 * y_[i] * alpha_[i] + std::log(lower_[i * n + i]);
  return likelihood;
}

GaussianProcess::Prediction GaussianProcess::predict(const SearchPoint& p) const {
  std::size_t n = x_.size();
  std::vector<double> k(n);
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) {
    k[i] = kernel(p, x_[i], lengthScale_, signalVariance_);
    mean += k[i] * alpha_[i];
  }
  auto v = forward(lower_, k);
  double var = signalVariance_;
  for (double e : v) var -= e * e;
  return {yMean_ + yScale_ * mean, yScale_ * std::sqrt(std::max(var, 0.0))};
}

double expectedImprovement(double mean, double stddev, double best) {
  double gain = mean - best;
  if (stddev <= 0) return std::max(gain, 0.0);
  double z = gain / stddev;
  double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * kPi);
  return gain * cdf + stddev * pdf;
}

BayesianSearch::BayesianSearch(std::vector<SearchPoint> candidates, double noise,
                               std::size_t spreadSamples)
    : candidates_(std::move(candidates)), noise_(noise), spreadSamples_(spreadSamples) {
  HVD_ENFORCE(!candidates_.empty(), "Bayesian search without candidates");
}

void BayesianSearch::add(const SearchPoint& point, double score) {
  measured_.push_back(point);
  scores_.push_back(score);
}

std::size_t BayesianSearch::next() const {
  if (measured_.size() < spreadSamples_ || measured_.empty()) {
    // Farthest from every measured point; ties go to the first candidate.
    std::size_t pick = 0;
    double farthest = -1;
    for (std::size_t c = 0; c < candidates_.size(); ++c) {
      double nearest = std::numeric_limits<double>::infinity();
      for (const auto& m : measured_)
        nearest = std::min(nearest, squaredDistance(candidates_[c], m));
      if (nearest > farthest) {
        farthest = nearest;
        pick = c;
      }
    }
    return pick;
  }
  GaussianProcess gp(noise_);
  gp.fit(measured_, scores_);
  double incumbent = -std::numeric_limits<double>::infinity();
  for (const auto& m : measured_) incumbent = std::max(incumbent, gp.predict(m).mean);
  auto [lo, hi] = std::minmax_element(scores_.begin(), scores_.end());
  double range = *hi > *lo ? *hi - *lo : 1.0;
  std::size_t pick = 0;
  double bestGain = -1;
  for (std::size_t c = 0; c < candidates_.size(); ++c) {
    auto p = gp.predict(candidates_[c]);
    double gain = expectedImprovement(p.mean, p.stddev, incumbent + kMinGain * range);
    if (gain > bestGain) {
      bestGain = gain;
      pick = c;
    }
  }
  return pick;
}

std::size_t BayesianSearch::best(std::optional<std::size_t> incumbent) const {
  HVD_ENFORCE(!measured_.empty(), "Bayesian search: best() before any measurement");
  HVD_ENFORCE(!incumbent || *incumbent < measured_.size(), "Bayesian search: incumbent ",
              *incumbent, " of ", measured_.size(), " measurements");
  GaussianProcess gp(noise_);
  gp.fit(measured_, scores_);
  std::size_t pick = 0;
  GaussianProcess::Prediction top{-std::numeric_limits<double>::infinity(), 0};
  for (std::size_t i = 0; i < measured_.size(); ++i) {
    auto p = gp.predict(measured_[i]);
    if (p.mean > top.mean) {
      top = p;
      pick = i;
    }
  }
  if (incumbent) {
    auto kept = gp.predict(measured_[*incumbent]);
    double doubt = std::sqrt(top.stddev * top.stddev + kept.stddev * kept.stddev);
    if (top.mean - kept.mean <= kKeepIncumbentSigmas * doubt) return *incumbent;
  }
  return pick;
}

}  // namespace hvd::runtime
