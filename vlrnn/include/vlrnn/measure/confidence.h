#pragma once
// How sure a measured median is: a bootstrap confidence interval, and the rule that calls a
// point noisy.
//
// NOTE [ Noisy points ]: on a shared machine two runs of the same schedule differ by up to
// 2x, so a ratio without its interval is not a finding. Every ratio to full BPTT is the
// median over rounds of the ratio within a round (methods take turns, so a drift of the
// machine hits both), and its 95 % interval comes from resampling those rounds. A point is
// noisy when the interval reaches further than ±10 % of the median, or when it rests on
// fewer than 3 rounds (two rounds cannot show their own spread): tables mark it, figures
// draw it hollow, and nothing noisy is quoted as a result.

#include <cstdint>
#include <vector>

namespace vlrnn::measure {

struct MedianInterval {
  double median = 0.0;
  double low = 0.0, high = 0.0;  // the confidence interval of the median
  int64_t samples = 0;

  // The larger distance from the median to an end, relative to the median.
  double relative_half_width() const;
  bool noisy(double tolerance = kNoisyTolerance) const;

  static constexpr double kNoisyTolerance = 0.10;
  static constexpr int64_t kMinSamples = 3;
};

// The median of `samples` with a percentile-bootstrap interval at `confidence` from
// `resamples` resamplings; deterministic (a fixed generator seed). Throws on no samples.
MedianInterval median_interval(const std::vector<double>& samples, double confidence = 0.95,
                               int64_t resamples = 2000);

// The value at fraction q (0..1) of non-empty `sorted`, interpolated linearly between the
// two nearest order statistics (timing summaries and the bootstrap's percentiles).
double sorted_quantile(const std::vector<double>& sorted, double q);

}  // namespace vlrnn::measure
