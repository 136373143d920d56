#include "vlrnn/measure/confidence.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

namespace vlrnn::measure {
namespace {

double median_of(std::vector<double>& v) {
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (n % 2 == 1) return v[mid];
  const double upper = v[mid];
  return 0.5 * (*std::max_element(v.begin(), v.begin() + mid) + upper);
}

// SplitMix64: a fixed, portable stream, so an interval is the same on every machine.
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double sorted_quantile(const std::vector<double>& sorted, double q) {
  const double at = q * double(sorted.size() - 1);
  const size_t i = size_t(std::floor(at));
  const size_t j = std::min(i + 1, sorted.size() - 1);
  return sorted[i] + (at - double(i)) * (sorted[j] - sorted[i]);
}

double MedianInterval::relative_half_width() const {
  if (median == 0.0) return INFINITY;
  return std::max(high - median, median - low) / std::abs(median);
}

bool MedianInterval::noisy(double tolerance) const {
  return samples < kMinSamples || !(relative_half_width() <= tolerance);
}

MedianInterval median_interval(const std::vector<double>& samples, double confidence,
                               int64_t resamples) {
  TORCH_CHECK(!samples.empty(), "median_interval: expected at least one sample, got none");
  TORCH_CHECK(confidence > 0 && confidence < 1, "median_interval confidence: expected a value "
              "in (0, 1), got ", confidence);
  TORCH_CHECK(resamples >= 1, "median_interval resamples: expected >= 1, got ", resamples);
  MedianInterval out;
  out.samples = int64_t(samples.size());
  std::vector<double> work = samples;
  out.median = median_of(work);
  std::vector<double> medians;
  medians.reserve(size_t(resamples));
  uint64_t state = 0x5EEDull + samples.size();
  const auto n = samples.size();
  for (int64_t r = 0; r < resamples; ++r) {
    for (size_t i = 0; i < n; ++i) work[i] = samples[next(state) % n];
    medians.push_back(median_of(work));
  }
  std::sort(medians.begin(), medians.end());
  const double tail = (1.0 - confidence) / 2.0;
  out.low = std::min(out.median, sorted_quantile(medians, tail));
  out.high = std::max(out.median, sorted_quantile(medians, 1.0 - tail));
  return out;
}

}  // namespace vlrnn::measure
