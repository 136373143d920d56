// The training tasks: what each batch holds, that a batch depends on its index alone, and
// that a bad task config names its key.
#include "lib/tasks.h"

#include "vlrnn/core/heads.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string error_of(const json& config) {
  try {
    make_task(config);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(Tasks, ABatchIsAFunctionOfSeedSplitAndIndexAlone) {
  const auto task = make_task({{"kind", "copy"}, {"delay", 20}, {"symbols", 3}});
  const auto a = task->batch(Split::kTrain, 5, 8, 1);
  torch::rand({100});  // the global generator does not matter
  const auto again = task->batch(Split::kTrain, 5, 8, 1);
  EXPECT_TRUE(torch::equal(a.inputs, again.inputs));
  EXPECT_TRUE(torch::equal(a.targets, again.targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kTrain, 6, 8, 1).targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kEval, 5, 8, 1).targets));
  EXPECT_FALSE(torch::equal(a.targets, task->batch(Split::kTrain, 5, 8, 2).targets));
}

TEST(Tasks, AddingScoresTheSumOfTheTwoMarkedValuesAtTheLastStep) {
  const auto task = make_task({{"kind", "adding"}, {"steps", 30}, {"min_length", 0.5}});
  const auto batch = task->batch(Split::kTrain, 0, 16, 3);
  ASSERT_TRUE(batch.has_lengths());
  EXPECT_EQ(batch.lengths.max().item<int64_t>(), 30);
  EXPECT_GE(batch.lengths.min().item<int64_t>(), 15);
  EXPECT_EQ(scored_steps(batch), 16);
  for (int64_t b = 0; b < 16; ++b) {
    const int64_t len = batch.lengths[b].item<int64_t>();
    const auto values = batch.inputs.select(1, b).select(1, 0);   // [T]
    const auto markers = batch.inputs.select(1, b).select(1, 1);  // [T]
    EXPECT_EQ(markers.sum().item<float>(), 2.0f);
    EXPECT_EQ(markers.slice(0, 0, len / 2).sum().item<float>(), 1.0f);  // one per half
    EXPECT_EQ(markers.slice(0, len).sum().item<float>(), 0.0f);         // none past the end
    const float sum = (values * markers).sum().item<float>();
    EXPECT_FLOAT_EQ(batch.targets[len - 1][b][0].item<float>(), sum);
    EXPECT_EQ(torch::isnan(batch.targets.select(1, b)).sum().item<int64_t>(), 29);
  }
  EXPECT_NEAR(task->chance_loss(), 1.0 / 6.0, 1e-12);
}

TEST(Tasks, CopyScoresTheRecallOfTheSymbolsAfterTheDelimiter) {
  const int64_t symbols = 3, delay = 12, alphabet = 5;
  const auto task = make_task({{"kind", "copy"}, {"delay", delay}, {"symbols", symbols},
                               {"alphabet", alphabet}});
  EXPECT_EQ(task->time_steps(), 2 * symbols + delay);
  EXPECT_EQ(task->input_size(), alphabet + 2);
  const auto batch = task->batch(Split::kTrain, 0, 6, 1);
  const auto codes = batch.inputs.argmax(-1);  // [T, B]
  EXPECT_EQ(scored_steps(batch), symbols * 6);
  for (int64_t b = 0; b < 6; ++b) {
    EXPECT_EQ(codes[symbols + delay - 1][b].item<int64_t>(), alphabet + 1);  // the delimiter
    for (int64_t j = 0; j < symbols; ++j) {
      EXPECT_EQ(batch.targets[symbols + delay + j][b].item<int64_t>(),
                codes[j][b].item<int64_t>() - 1);
    }
    EXPECT_EQ(batch.targets.select(1, b).slice(0, 0, symbols + delay).max().item<int64_t>(),
              kNoTarget);
  }
  EXPECT_NEAR(task->chance_loss(), std::log(5.0), 1e-12);
}

TEST(Tasks, CopyWithVariableDelaysRecallsAtEachSequencesEnd) {
  const auto task = make_task({{"kind", "copy"}, {"delay", 40}, {"symbols", 2},
                               {"min_length", 0.25}});
  const auto batch = task->batch(Split::kTrain, 1, 12, 1);
  ASSERT_TRUE(batch.has_lengths());
  EXPECT_EQ(batch.lengths.max().item<int64_t>(), 44);
  EXPECT_EQ(scored_steps(batch), 2 * 12);
  for (int64_t b = 0; b < 12; ++b) {
    const int64_t len = batch.lengths[b].item<int64_t>();
    EXPECT_NE(batch.targets[len - 1][b].item<int64_t>(), kNoTarget);
    EXPECT_NE(batch.targets[len - 2][b].item<int64_t>(), kNoTarget);
    EXPECT_EQ(batch.targets[len - 3][b].item<int64_t>(), kNoTarget);
  }
}

TEST(Tasks, TextWindowsPredictTheNextCharacter) {
  const std::string path = ::testing::TempDir() + "/vlrnn_text_task.txt";
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcab";
  std::ofstream(path) << text;
  const auto task = make_task({{"kind", "text"}, {"path", path}, {"steps", 16}});
  EXPECT_EQ(task->head_outputs(), 3);  // a, b, c
  const auto batch = task->batch(Split::kTrain, 0, 4, 1);
  const auto ids = batch.inputs.argmax(-1);  // [T, B]
  EXPECT_TRUE(torch::equal(ids.slice(0, 1), batch.targets.slice(0, 0, 15)));
  // Unigram frequencies 2/5, 2/5, 1/5.
  EXPECT_NEAR(task->chance_loss(), -(0.8 * std::log(0.4) + 0.2 * std::log(0.2)), 1e-2);
  std::remove(path.c_str());
}

TEST(Tasks, BadConfigsNameTheKey) {
  EXPECT_NE(error_of({{"kind", "copy"}}).find("task.delay: missing"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "copy"}, {"delay", 0}}).find("task.delay"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "adding"}, {"steps", 10}, {"min_length", 2}})
                .find("task.min_length"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "adding"}, {"steps", 10}, {"delay", 3}}).find("task.delay: unknown"),
            std::string::npos);
  EXPECT_NE(error_of({{"kind", "mnist"}}).find("task.kind"), std::string::npos);
  EXPECT_NE(error_of({{"kind", "text"}, {"path", "/no/such/file"}, {"steps", 8}})
                .find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace vlrnn::experiments
