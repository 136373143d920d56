// Random differential testing: configurations are a pure function of their seed, cover the
// axes the issue names, and a fixed-seed set passes (the CI share of `vlrnn verify --random`).
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"

#include "vlrnn/verify/random_cases.h"

#include <map>
#include <set>

namespace vlrnn::verify {
namespace {

TEST(RandomCases, AConfigurationIsAPureFunctionOfItsSeed) {
  const auto a = random_configuration(random_case_seed(1, 17));
  const auto b = random_configuration(random_case_seed(1, 17));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name(), b[i].name());
    EXPECT_EQ(a[i].method, b[i].method);
    EXPECT_EQ(a[i].lengths, b[i].lengths);
    EXPECT_EQ(a[i].hidden_size, b[i].hidden_size);
  }
  EXPECT_NE(random_case_seed(1, 17), random_case_seed(1, 18));
  EXPECT_NE(random_case_seed(1, 17), random_case_seed(2, 17));
}

TEST(RandomCases, EveryExactMethodAndNoApproximateOneIsVerified) {
  std::set<std::string> methods;
  // Seed 42, and the first seed from 0 whose model is bidirectional: each runs every exact
  // method that takes it.
  uint64_t bidirectional_seed = 0;
  while (!is_bidirectional_kind(random_configuration(bidirectional_seed).front().model)) {
    ASSERT_LT(++bidirectional_seed, 1000u) << "no bidirectional model drawn";
  }
  for (const uint64_t seed : {uint64_t(42), bidirectional_seed}) {
    std::set<std::string> methods;
    const auto cases = random_configuration(seed);
    const bool bidirectional = is_bidirectional_kind(cases.front().model);
    for (const auto& c : cases) methods.insert(c.method.substr(0, c.method.find(':')));
    for (const auto& name : method_names()) {
      const bool takes = bidirectional ? handles_bidirectional(name) : handles_left_to_right(name);
      EXPECT_EQ(methods.count(name) == 1, make_method(name)->is_exact() && name != "full" && takes)
          << name << " on " << cases.front().model;
    }
  }
}

// Over 2000 configurations (the committed run's size): about a tenth at the large end, every
// model kind, dropout, both dtypes, each lengths mode, lengths of 1.
TEST(RandomCases, TheDrawsCoverEveryAxis) {
  int64_t large = 0, padded_tail = 0, reaching_T = 0, fixed = 0, length_one = 0, dropout = 0,
          f32 = 0, no_input_grad = 0, max_T = 0, max_H = 0, max_B = 0;
  std::set<std::string> kinds, heads;
  for (int64_t i = 0; i < 2000; ++i) {
    const auto c = random_configuration(random_case_seed(1, i)).front();
    large += c.time_steps >= 200;
    max_T = std::max(max_T, c.time_steps);
    max_H = std::max(max_H, c.hidden_size);
    max_B = std::max(max_B, c.batch);
    kinds.insert(c.model);
    heads.insert(c.head);
    dropout += c.dropout > 0;
    f32 += c.dtype == torch::kFloat32;
    no_input_grad += !c.inputs_with_grad;
    if (c.lengths.empty()) {
      ++fixed;
    } else {
      const auto longest = *std::max_element(c.lengths.begin(), c.lengths.end());
      (longest == c.time_steps ? reaching_T : padded_tail) += 1;
      length_one += std::count(c.lengths.begin(), c.lengths.end(), 1) > 0;
    }
    EXPECT_LE(c.hidden_size, 128);
    EXPECT_LE(c.batch, 16);
    EXPECT_LE(c.time_steps, 600);
  }
  EXPECT_GT(large, 150);
  EXPECT_LT(large, 260);
  EXPECT_GT(max_T, 500);  // past every internal chunk size (32, 64)
  EXPECT_GT(max_H, 100);
  EXPECT_EQ(max_B, 16);
  const auto registered = model_kinds();
  const auto wrapped = std::count_if(kinds.begin(), kinds.end(), [](const std::string& kind) {
    return kind.rfind(kBidirectionalPrefix, 0) == 0;  // "bi:<kind>"
  });
  EXPECT_EQ(kinds.size() - size_t(wrapped), registered.size());
  EXPECT_GT(wrapped, 5);
  EXPECT_EQ(heads.size(), 2u);
  for (int64_t count : {padded_tail, reaching_T, fixed, length_one, dropout, f32, no_input_grad}) {
    EXPECT_GT(count, 100);
  }
}

TEST(RandomCases, AFailingRowCarriesACommandThatRerunsJustIt) {
  const auto c = random_configuration(random_case_seed(3, 5)).front();
  const auto command = random_case_command(c);
  EXPECT_NE(command.find("--random-case " + std::to_string(c.seed)), std::string::npos);
  EXPECT_NE(command.find(c.method), std::string::npos);
}

// The CI share of the random set: a fixed seed, every exact method of every configuration.
TEST(RandomCases, AFixedSeedSetPasses) {
  int64_t cases = 0;
  for (int64_t i = 0; i < 60; ++i) {
    for (const auto& c : random_configuration(random_case_seed(2026, i))) {
      const auto outcome = run_case(c);
      ++cases;
      EXPECT_TRUE(outcome.passed) << c.name() << " " << c.method << ": " << outcome.error
                                  << " max rel " << outcome.diff.max_rel << " worst "
                                  << outcome.diff.worst << "; rerun: " << random_case_command(c);
    }
  }
  EXPECT_GT(cases, 200);
}

}  // namespace
}  // namespace vlrnn::verify
