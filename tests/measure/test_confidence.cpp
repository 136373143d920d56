#include "vlrnn/measure/confidence.h"

#include <gtest/gtest.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <random>

namespace vlrnn::measure {
namespace {

TEST(MedianInterval, OneSampleIsItsOwnIntervalButNoisy) {
  const auto m = median_interval({2.5});
  EXPECT_EQ(m.median, 2.5);
  EXPECT_EQ(m.low, 2.5);
  EXPECT_EQ(m.high, 2.5);
  EXPECT_TRUE(m.noisy()) << "one round cannot show its own spread";
}

TEST(MedianInterval, IdenticalRoundsAreNotNoisy) {
  const auto m = median_interval(std::vector<double>(7, 1.25));
  EXPECT_EQ(m.low, 1.25);
  EXPECT_EQ(m.high, 1.25);
  EXPECT_EQ(m.relative_half_width(), 0.0);
  EXPECT_FALSE(m.noisy());
}

TEST(MedianInterval, TightSamplesCoverTheirCentre) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> ratio(1.0, 0.01);
  std::vector<double> samples;
  for (int i = 0; i < 41; ++i) samples.push_back(ratio(gen));
  const auto m = median_interval(samples);
  EXPECT_LE(m.low, m.median);
  EXPECT_GE(m.high, m.median);
  EXPECT_LT(m.low, 1.0);
  EXPECT_GT(m.high, 1.0);
  EXPECT_LT(m.relative_half_width(), 0.02);
  EXPECT_FALSE(m.noisy());
}

TEST(MedianInterval, ScatteredRoundsAreNoisy) {
  // The spread seen on a loaded 2-core machine: the same schedule from 0.6x to 1.4x.
  const auto m = median_interval({0.6, 1.37, 0.9, 1.2, 0.7, 1.1});
  EXPECT_GT(m.relative_half_width(), 0.10);
  EXPECT_TRUE(m.noisy());
}

TEST(MedianInterval, IsDeterministic) {
  const std::vector<double> samples = {1.0, 1.1, 0.95, 1.3, 1.02};
  const auto a = median_interval(samples), b = median_interval(samples);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
}

TEST(MedianInterval, RejectsBadArguments) {
  EXPECT_THROW(median_interval({}), c10::Error);
  EXPECT_THROW(median_interval({1.0}, 1.5), c10::Error);
  EXPECT_THROW(median_interval({1.0}, 0.95, 0), c10::Error);
}

}  // namespace
}  // namespace vlrnn::measure
