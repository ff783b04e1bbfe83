// Chooses which setting to measure next when each measurement is slow and noisy (the autotuner
// measures one setting over several training steps): Bayesian optimization over a finite list
// of candidate points in [0,1]^d. A Gaussian process fitted to the scores measured so far
// predicts every candidate's score with an uncertainty; the next candidate is the one with the
// largest expected improvement over the best predicted score of a measured point. The first
// few samples are spread out instead (each candidate farthest from every measured point), so
// the process has something to fit.
//
// Pure computation, deterministic for the same inputs; the sizes are a few dozen points, so
// the Cholesky factorisation is written out here rather than pulling in a linear-algebra
// library for one n x n solve.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace hvd::runtime {

using SearchPoint = std::vector<double>;  // one coordinate per tuned knob, each in [0,1]

// Gaussian-process regression with a squared-exponential kernel. Scores are standardised
// (mean 0, variance 1) before fitting; the kernel's length scale and variance are the pair of
// a fixed ladder with the highest marginal likelihood.
class GaussianProcess {
 public:
  // `noise`: the variance of one measurement's error, in units of the scores' variance.
  explicit GaussianProcess(double noise);

  // Needs at least one point; x and y have the same length.
  void fit(const std::vector<SearchPoint>& x, const std::vector<double>& y);

  struct Prediction {
    double mean = 0;    // in the units of the scores
    double stddev = 0;  // of the underlying score (measurement noise excluded)
  };
  Prediction predict(const SearchPoint& p) const;
  double lengthScale() const { return lengthScale_; }

 private:
  // Factorises K + noise*I for the kernel's length scale and variance; returns the log
  // marginal likelihood of the standardised scores.
  double factorise(double scale, double variance);

  double noise_;
  double lengthScale_ = 0;
  double signalVariance_ = 1;
  double yMean_ = 0, yScale_ = 1;
  std::vector<SearchPoint> x_;
  std::vector<double> y_;      // standardised
  std::vector<double> lower_;  // Cholesky factor, row-major n x n
  std::vector<double> alpha_;  // (K + noise*I)^-1 y
};

// Expected improvement of a normal(mean, stddev) score over `best` (maximising).
double expectedImprovement(double mean, double stddev, double best);

class BayesianSearch {
 public:
  // `spreadSamples`: how many samples (counting the ones added before the first next()) are
  // chosen to spread out before expected improvement takes over.
  BayesianSearch(std::vector<SearchPoint> candidates, double noise, std::size_t spreadSamples);

  // A measured score of a point (a candidate or any other point in [0,1]^d).
  void add(const SearchPoint& point, double score);
  // Index into candidates() of the point to measure next. May repeat a measured candidate:
  // measuring it again is what the noise calls for.
  std::size_t next() const;
  // Index (in the order of add()) of the measured point with the highest fitted score: with
  // noisy measurements, the best fit rather than the luckiest single measurement. With
  // `incumbent` (an index of a measured point, such as the setting the user configured), that
  // point is kept unless the best beats its fitted score by more than twice the two fits'
  // combined uncertainty: a difference the measurements cannot tell from noise is no reason to
  // move.
  std::size_t best(std::optional<std::size_t> incumbent = std::nullopt) const;

  const std::vector<SearchPoint>& candidates() const { return candidates_; }
  std::size_t samples() const { return scores_.size(); }

 private:
  std::vector<SearchPoint> candidates_;
  double noise_;
  std::size_t spreadSamples_;
  std::vector<SearchPoint> measured_;
  std::vector<double> scores_;
};

}  // namespace hvd::runtime
