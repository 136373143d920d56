// Training runs: every exact method follows full BPTT's trajectory, truncation does not,
// a killed run resumes bit-for-bit, and a budget picks the batch.
#include "lib/trainer.h"

#include "idx_test_files.h"
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/methods.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string fresh_dir(const std::string& name) {
  const auto dir = ::testing::TempDir() + "/vlrnn_trainer_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TrainConfig small_config(json overrides = json::object()) {
  json config = {{"task", {{"kind", "adding"}, {"time_steps", 24}, {"min_length", 0.5}}},
                 {"model", {{"kind", "lstm"}, {"hidden", 8}}},
                 {"methods", {"full"}},
                 {"batch", 4},
                 {"optimizer_steps", 12},
                 {"optimizer", {{"kind", "adam"}, {"lr", 0.01}, {"clip", 1.0}}},
                 {"lr_schedule", {{"kind", "cosine"}, {"warmup", 2}}},
                 {"eval_every", 5},
                 {"eval_batches", 1},
                 {"eval_batch", 4},
                 {"checkpoint_every", 3},
                 {"dtype", "float64"}};
  for (const auto& item : overrides.items()) config[item.key()] = item.value();  // whole values
  return parse_train_config(config, "test");
}

// The step records of one run (the whole run, no resume).
std::vector<json> train(const TrainConfig& config, const TrainRunSpec& run, const std::string& dir,
                        int64_t stop_after = 0, bool resume = false) {
  std::vector<json> records;
  TrainHooks hooks;
  hooks.log = [&](const std::vector<json>& r) { records.insert(records.end(), r.begin(), r.end()); };
  hooks.stop_after_step = stop_after;
  const auto task = make_task(config.task);
  train_run(config, *task, run, dir, resume, hooks);
  std::vector<json> steps;
  for (const auto& r : records) {
    if (r["kind"] == "train_step") steps.push_back(r);
  }
  return steps;
}

double relative_difference(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

// Figure (a)'s assertion: from one seed, every exact method's losses agree with full BPTT's
// to float64 rounding over the first 200 steps (same weights, same batches, same updates).
TEST(Trainer, EveryExactMethodFollowsFullBpttsTrajectoryFor200Steps) {
  auto config = small_config({{"optimizer_steps", 200}, {"eval_every", 200},
                              {"checkpoint_every", 200},
                              {"model", {{"kind", "lstm"}, {"hidden", 8}, {"dropout", 0.0}}}});
  const auto dir = fresh_dir("exact");
  const auto reference = train(config, {"full", 7, 4}, dir);
  ASSERT_EQ(reference.size(), 200u);
  const std::vector<std::string> exact = {"vlrnn:block_length=5", "checkpoint:segments=4",
                                          "revolve:slots=3", "planner:percent=30"};
  for (const auto& method : exact) {
    const auto steps = train(config, {method, 7, 4}, dir);
    ASSERT_EQ(steps.size(), reference.size()) << method;
    double worst = 0.0;
    for (size_t i = 0; i < steps.size(); ++i) {
      worst = std::max(worst, relative_difference(steps[i]["loss"].get<double>(),
                                                  reference[i]["loss"].get<double>()));
    }
    EXPECT_LT(worst, 1e-10) << method << ": the loss left full BPTT's trajectory";
  }
  // Truncation is not exact: its trajectory leaves full BPTT's (the comparison can fail).
  const auto truncated = train(config, {"tbptt:k=4", 7, 4}, dir);
  EXPECT_GT(relative_difference(truncated.back()["loss"].get<double>(),
                                reference.back()["loss"].get<double>()), 1e-6);
}

void expect_same_trajectory(const std::vector<json>& resumed, const std::vector<json>& straight) {
  ASSERT_EQ(resumed.size(), straight.size());
  for (size_t i = 0; i < straight.size(); ++i) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "eval_loss"}) {
      EXPECT_EQ(resumed[i].value(key, json()), straight[i].value(key, json()))
          << key << " at record " << i;
    }
  }
}

// NOTE [ Resuming is bit-for-bit ]: killed after step 7 (checkpoint at 6), the resumed run
// logs steps 7.. again and ends exactly where the run that never stopped ends — with dropout
// (the generators) and Adam's moments in play.
TEST(Trainer, AKilledRunResumesBitForBit) {
  for (const std::string optimizer : {"adam", "sgd"}) {
    SCOPED_TRACE(optimizer);
    auto config = small_config({{"optimizer", {{"kind", optimizer}, {"lr", 0.05}}},
                                {"model", {{"kind", "lstm"}, {"hidden", 8}, {"layers", 2},
                                           {"dropout", 0.3}}}});
    const TrainRunSpec run{"vlrnn:block_length=5", 3, 4};
    const auto straight = train(config, run, fresh_dir("straight"));
    const auto dir = fresh_dir("killed");
    const auto before_kill = train(config, run, dir, /*stop_after=*/7);
    EXPECT_EQ(before_kill.size(), 6u);  // flushed at step 5 (evaluation) and 6 (checkpoint)
    EXPECT_EQ(checkpoint_step(dir, run.label()), 6);
    auto resumed = records_up_to(before_kill, run.label(), checkpoint_step(dir, run.label()));
    const auto rest = train(config, run, dir, 0, /*resume=*/true);
    EXPECT_EQ(rest.front()["step"], 7);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
    expect_same_trajectory(resumed, straight);
  }
}

// A stand-in Fashion-MNIST (tests/experiments/idx_test_files.h) of 4 x 4 images whose
// every pixel tells the class, 0 (dark) or 1 (bright): a small GRU learns it in a few dozen
// steps.
std::string small_image_folder() {
  torch::manual_seed(0);
  auto images = [](const torch::Tensor& labels) {
    const int64_t n = labels.size(0);
    return (labels.view({n, 1, 1}) * 200 + torch::randint(0, 50, {n, 4, 4}, torch::kLong))
        .to(torch::kUInt8);  // [N, 4, 4]
  };
  const auto train_labels = (torch::arange(40, torch::kLong) % 2).to(torch::kUInt8);
  const auto test_labels = (torch::arange(20, torch::kLong) / 10).to(torch::kUInt8);
  return testing::write_fashion_mnist_folder("trainer_images", images(train_labels),
                                             train_labels, images(test_labels), test_labels);
}

// Evaluation reports the accuracy of a sequence classification; once every held-out loss is
// below log 2 (the right class more likely than all others together), every sequence is
// classified right. A task that does not classify sequences reports none.
TEST(Trainer, EvaluationReportsTheAccuracyOfASequenceClassification) {
  const auto config = small_config(
      {{"task", {{"kind", "fashion_mnist"}, {"path", small_image_folder()}}},
       {"model", {{"kind", "gru"}, {"hidden", 8}}}, {"optimizer_steps", 60}, {"eval_every", 20},
       {"eval_batches", 2}, {"eval_batch", 16}, {"optimizer", {{"kind", "adam"}, {"lr", 0.05}}}});
  std::vector<json> records;
  TrainHooks hooks;
  hooks.log = [&](const std::vector<json>& r) { records.insert(records.end(), r.begin(), r.end()); };
  const auto task = make_task(config.task);
  train_run(config, *task, {"vlrnn:block_length=5", 1, 8}, fresh_dir("accuracy"), false, hooks);
  std::vector<json> evaluations;
  for (const auto& r : records) {
    if (r.contains("eval_loss")) evaluations.push_back(r);
  }
  ASSERT_EQ(evaluations.size(), 3u);
  for (const auto& r : evaluations) {
    const double accuracy = r["eval_accuracy"], loss = r["eval_loss"];
    EXPECT_GE(accuracy, 0.0);
    EXPECT_LE(accuracy, 1.0);
    EXPECT_DOUBLE_EQ(accuracy * 32, std::round(accuracy * 32));  // of 2 x 16 sequences
    if (loss * 32 < std::log(2.0)) EXPECT_EQ(accuracy, 1.0) << "at step " << r["step"];
  }
  EXPECT_GE(evaluations.back()["eval_accuracy"].get<double>(), 0.9) << "it did not learn";
  ASSERT_EQ(records.back()["kind"], "train_run");
  EXPECT_EQ(records.back()["final_eval_accuracy"], evaluations.back()["eval_accuracy"]);

  records.clear();
  const auto adding = small_config();  // regression: no classes, no accuracy
  train_run(adding, *make_task(adding.task), {"full", 1, 4}, fresh_dir("no_accuracy"), false, hooks);
  for (const auto& r : records) {
    EXPECT_FALSE(r.contains("eval_accuracy") || r.contains("final_eval_accuracy"));
  }
}

// Every task with every registered method (variable lengths on each), a few steps each: the
// loss is finite, every step is logged, and each run ends with its summary.
TEST(Trainer, EveryTaskTrainsWithEveryMethod) {
  const std::string text_path = ::testing::TempDir() + "/vlrnn_trainer_text.txt";
  {
    std::ofstream text(text_path);
    for (int i = 0; i < 40; ++i) text << "the quick brown fox jumps over the lazy dog. ";
  }
  const std::vector<json> tasks = {
      {{"kind", "adding"}, {"time_steps", 20}, {"min_length", 0.5}},
      {{"kind", "copy"}, {"delay", 9}, {"symbols", 2}, {"min_length", 0.5}},
      {{"kind", "text"}, {"path", text_path}, {"time_steps", 16}, {"min_length", 0.5}},
      {{"kind", "fashion_mnist"}, {"path", small_image_folder()}, {"permuted", true}}};
  for (const auto& task : tasks) {
    for (const auto& method : method_names()) {
      if (!handles_left_to_right(method)) continue;  // bivlrnn takes bidirectional models
      SCOPED_TRACE(task.dump() + " " + method);
      auto config = small_config({{"task", task}, {"optimizer_steps", 3}, {"eval_every", 2},
                                  {"dtype", "float32"}});
      std::vector<json> records;
      TrainHooks hooks;
      hooks.log = [&](const std::vector<json>& r) { records.insert(records.end(), r.begin(), r.end()); };
      const auto made = make_task(config.task);
      const auto outcome = train_run(config, *made, {method, 1, 4}, fresh_dir("every"), false, hooks);
      EXPECT_TRUE(outcome.finished);
      ASSERT_EQ(records.size(), 4u);  // 3 steps and the run's summary
      for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isfinite(records[i]["loss"].get<double>()));
      EXPECT_EQ(records[3]["kind"], "train_run");
      EXPECT_TRUE(std::isfinite(records[3]["final_eval_loss"].get<double>()));
    }
  }
}

// The bidirectional kinds with the methods that take them (bivlrnn, fixed and budgeted, and
// the planner, which runs bivlrnn on them), and a linear recurrence with VLRNN: a config
// naming them parses and trains a few steps.
TEST(Trainer, BidirectionalAndLinearKindsTrain) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"bilstm", {"bivlrnn", "bivlrnn:percent=50", "planner:percent=50"}},
      {"bi:gru_v3", {"bivlrnn:block_length=5"}},
      {"bi:minlstm", {"checkpoint"}},
      {"mingru", {"vlrnn:block_length=5", "planner:percent=50"}},
      {"ssm", {"vlrnn"}}};
  for (const auto& [kind, methods] : cases) {
    auto config = small_config({{"model", {{"kind", kind}, {"hidden", 6}}}, {"methods", methods},
                                {"optimizer_steps", 2}, {"eval_every", 2}});
    const auto task = make_task(config.task);
    for (const auto& run : config.runs) {
      SCOPED_TRACE(kind + " " + run.method);
      std::vector<json> records;
      TrainHooks hooks;
      hooks.log = [&](const std::vector<json>& r) { records.insert(records.end(), r.begin(), r.end()); };
      const auto outcome = train_run(config, *task, run, fresh_dir("kinds"), false, hooks);
      EXPECT_TRUE(outcome.finished);
      ASSERT_EQ(records.size(), 3u);  // 2 steps and the run's summary
      EXPECT_TRUE(std::isfinite(records[1]["loss"].get<double>()));
    }
  }
}

TEST(Trainer, RecordsUpToKeepsOtherRunsAndEarlierSteps) {
  const std::vector<json> records = {
      {{"run", "a"}, {"kind", "train_step"}, {"step", 1}},
      {{"run", "b"}, {"kind", "train_step"}, {"step", 5}},
      {{"run", "a"}, {"kind", "train_step"}, {"step", 2}},
      {{"run", "a"}, {"kind", "train_run"}}};
  const auto kept = records_up_to(records, "a", 1);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0]["step"], 1);
  EXPECT_EQ(kept[1]["run"], "b");
}

TEST(Trainer, BatchMaxIsTheLargestThatFitsTheBudget) {
  auto config = small_config({{"optimizer_steps", 1}, {"memory_budget_mib", 0.25},
                              {"batch_max", 256},
                              {"methods", {{{"method", "full"}, {"batch", "max"}},
                                           {{"method", "vlrnn:block_length=5"}, {"batch", "max"}}}}});
  const auto task = make_task(config.task);
  std::vector<json> runs;
  TrainHooks hooks;
  hooks.log = [&](const std::vector<json>& r) {
    for (const auto& x : r) {
      if (x["kind"] == "train_run") runs.push_back(x);
    }
  };
  for (const auto& run : config.runs) train_run(config, *task, run, fresh_dir("max"), false, hooks);
  ASSERT_EQ(runs.size(), 2u);
  const int64_t full = runs[0]["batch"], blocks = runs[1]["batch"];
  EXPECT_GE(full, 1);
  EXPECT_LT(full, 256);
  EXPECT_GT(blocks, full);  // VLRNN needs less per sequence: a larger batch fits
}

TEST(Trainer, BadConfigsNameTheField) {
  auto error_of = [](json overrides) -> std::string {
    try {
      small_config(overrides);
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "";
  };
  EXPECT_NE(error_of({{"optimizer", {{"kind", "adagrad"}}}}).find("optimizer.kind"), std::string::npos);
  EXPECT_NE(error_of({{"methods", {"nope"}}}).find("methods[0]"), std::string::npos);
  EXPECT_NE(error_of({{"methods", {{{"method", "full"}, {"batch", "max"}}}}})
                .find("memory_budget_mib"), std::string::npos);
  EXPECT_NE(error_of({{"model", {{"kind", "rnn"}, {"carry_bias", 2}}}}).find("model.carry_bias"),
            std::string::npos);
  EXPECT_NE(error_of({{"stepz", 3}}).find("stepz: unknown key"), std::string::npos);
  EXPECT_NE(error_of({{"flush_denormals", 1}}).find("flush_denormals: expected true or false"),
            std::string::npos);
  EXPECT_TRUE(small_config().flush_denormals);
  EXPECT_FALSE(small_config({{"flush_denormals", false}}).flush_denormals);
  // A method entry's own model: its keys are checked under its own path, and two entries
  // that would write the same run are refused.
  EXPECT_NE(error_of({{"methods", {{{"method", "full"}, {"model", {{"kind", "nope"}}}}}}})
                .find("methods[0].model.kind"), std::string::npos);
  EXPECT_NE(error_of({{"methods", {{{"method", "full"}, {"model", {{"kind", "mingru"}, {"carry_bias", 1}}}}}}})
                .find("methods[0].model.carry_bias"), std::string::npos);
  const json mingru = {{"method", "full"}, {"model", {{"kind", "mingru"}, {"hidden", 4}}}};
  EXPECT_NE(error_of({{"methods", {mingru, mingru}}}).find("methods[1]: the run \"full|model=mingru|seed=1\" comes twice"),
            std::string::npos);
  // Model kinds: an unknown one, "bi:" of an unknown or a bidirectional one, and a method
  // that does not take the model, each named.
  for (const std::string kind : {"transformer", "bi:transformer", "bi:bigru"}) {
    EXPECT_NE(error_of({{"model", {{"kind", kind}}}}).find("model.kind"), std::string::npos) << kind;
    EXPECT_NE(error_of({{"model", {{"kind", kind}}}}).find(kind), std::string::npos) << kind;
  }
  const auto refused = error_of({{"model", {{"kind", "bilstm"}}}, {"methods", {"full", "vlrnn"}}});
  for (const std::string fragment : {"methods[1]", "vlrnn", "bilstm", "bivlrnn"}) {
    EXPECT_NE(refused.find(fragment), std::string::npos) << fragment << " in " << refused;
  }
  EXPECT_NE(error_of({{"model", {{"kind", "lru"}}}, {"methods", {"bivlrnn"}}}).find("methods[0]"),
            std::string::npos);
  // Found while writing the fuzz targets (tests/fuzz/regressions/train_config/): 1e300 MiB
  // overflowed the conversion to a byte count (undefined behaviour).
  EXPECT_NE(error_of({{"memory_budget_mib", 1e300}}).find("memory_budget_mib: expected a size in MiB"),
            std::string::npos);
}

// A method entry with its own "model" trains that model, side by side with the config's on
// the same batches; its runs and records name the model.
TEST(Trainer, AMethodEntryTrainsItsOwnModel) {
  const auto config = small_config(
      {{"optimizer_steps", 2}, {"eval_every", 2},
       {"methods", {"vlrnn:block_length=5",
                    {{"method", "vlrnn:block_length=5"}, {"model", {{"kind", "mingru"}, {"hidden", 6}}}}}}});
  ASSERT_EQ(config.runs.size(), 2u);
  EXPECT_EQ(config.runs[0].label(), "vlrnn:block_length=5|seed=1");
  EXPECT_EQ(config.runs[1].label(), "vlrnn:block_length=5|model=mingru|seed=1");
  EXPECT_EQ(config.model_of(config.runs[0]).kind, "lstm");
  EXPECT_EQ(config.model_of(config.runs[1]).kind, "mingru");
  for (size_t i = 0; i < 2; ++i) {
    const auto steps = train(config, config.runs[i], fresh_dir("own_model" + std::to_string(i)));
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[0]["model"], config.model_of(config.runs[i]).kind);
    EXPECT_EQ(steps[0]["run"], config.runs[i].label());
    EXPECT_TRUE(std::isfinite(steps[1]["loss"].get<double>()));
  }
}

TEST(Trainer, LearningRateFollowsTheBatchWhenAskedTo) {
  const auto config = small_config({{"batch", 8}, {"optimizer", {{"lr", 0.01},
                                                                  {"batch_scaling", "sqrt"}}}});
  EXPECT_EQ(config.optimizer.reference_batch, 8);
  EXPECT_NEAR(config.optimizer.lr_for_batch(32), 0.02, 1e-15);
  EXPECT_NEAR(config.optimizer.lr_for_batch(8), 0.01, 1e-15);
  auto linear = config.optimizer;
  linear.batch_scaling = "linear";
  EXPECT_NEAR(linear.lr_for_batch(32), 0.04, 1e-15);
  EXPECT_DOUBLE_EQ(small_config().optimizer.lr_for_batch(1000), 0.01);  // "none" by default
}

TEST(Trainer, LearningRateWarmsUpThenDecaysToItsFinalFraction) {
  LrSchedule schedule{"cosine", 10, 0.1};
  EXPECT_DOUBLE_EQ(schedule.lr_at(1.0, 0, 110), 0.1);
  EXPECT_DOUBLE_EQ(schedule.lr_at(1.0, 9, 110), 1.0);
  EXPECT_DOUBLE_EQ(schedule.lr_at(1.0, 10, 110), 1.0);
  EXPECT_NEAR(schedule.lr_at(1.0, 60, 110), 0.55, 1e-12);
  EXPECT_NEAR(schedule.lr_at(1.0, 110, 110), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ((LrSchedule{"constant", 0, 0}.lr_at(0.5, 99, 100)), 0.5);
}

// "lr_schedule" is the key; "schedule", its older name, still reads, and both at once is
// refused rather than one silently winning.
TEST(Trainer, LearningRateScheduleKeepsItsOlderName) {
  const json schedule = {{"kind", "cosine"}, {"warmup", 7}};
  EXPECT_EQ(small_config({{"lr_schedule", schedule}}).lr_schedule.warmup, 7);
  const json older = {{"task", {{"kind", "adding"}, {"time_steps", 24}}}, {"methods", {"full"}},
                      {"schedule", schedule}};
  EXPECT_EQ(parse_train_config(older, "test").lr_schedule.warmup, 7);
  // Errors name the key as the config spells it.
  testing::expect_error_mentions(
      [] { small_config({{"lr_schedule", {{"kind", "cosine"}, {"warmup", -1}}}}); },
      {"lr_schedule.warmup"});
  testing::expect_error_mentions([&] {
    parse_train_config({{"task", {{"kind", "adding"}, {"time_steps", 24}}}, {"methods", {"full"}},
                        {"schedule", {{"kind", "linear"}}}}, "test");
  }, {"schedule.kind"});
  // small_config() has an lr_schedule already.
  testing::expect_error_mentions([&] { small_config({{"schedule", schedule}}); },
                                 {"schedule", "got both \"lr_schedule\" and \"schedule\""});
}

// "steps" meant the optimizer's steps at the top level and the sequence length inside
// "task": both were renamed, and each old spelling is refused naming its new key.
TEST(Trainer, TheOldStepsKeysAreRefusedNamingTheirNewNames) {
  EXPECT_EQ(small_config({{"optimizer_steps", 7}}).optimizer_steps, 7);
  testing::expect_error_mentions(
      [] { small_config({{"steps", 7}}); },
      {"config steps: renamed to \"optimizer_steps\" (the number of optimizer steps)",
       "the task's length is \"task.time_steps\""});
  for (const json& task : {json{{"kind", "adding"}, {"steps", 24}},
                           json{{"kind", "text"}, {"path", "/no/such/file"}, {"steps", 8}}}) {
    SCOPED_TRACE(task.dump());
    testing::expect_error_mentions([&] { small_config({{"task", task}}); },
                                   {"config task.steps: renamed to \"task.time_steps\""});
  }
}

// `vlrnn train --device` replaces the config's device, and the config recorded (which
// --resume checks) says which device trained.
TEST(Trainer, ADeviceGivenReplacesTheConfigsDevice) {
  const auto path = std::filesystem::temp_directory_path() / "vlrnn_test_train_device.json";
  {
    std::ofstream out(path);
    out << R"({"task": {"kind": "adding", "time_steps": 24}, "methods": ["full"],
               "device": "cuda:7"})";
  }
  const auto config = load_train_config(path.string(), "cpu");
  EXPECT_TRUE(config.device.is_cpu());
  EXPECT_EQ(config.source["device"], "cpu");
  std::filesystem::remove(path);
}

// A folder trained before the rename stored its config with the old keys; --resume reads
// that with today's names (with_current_key_names), so the rewritten config resumes it.
TEST(Trainer, AnOlderConfigReadsWithTodaysKeyNames) {
  const json older = {{"task", {{"kind", "adding"}, {"steps", 24}}}, {"methods", {"full"}},
                      {"steps", 12}};
  const json today = {{"task", {{"kind", "adding"}, {"time_steps", 24}}},
                      {"methods", {"full"}}, {"optimizer_steps", 12}};
  EXPECT_EQ(with_current_key_names(older), parse_train_config(today, "test").source);
  EXPECT_EQ(with_current_key_names(today), today);
  // Another config is still another config.
  json other = older;
  other["steps"] = 13;
  EXPECT_NE(with_current_key_names(other), today);
  EXPECT_EQ(with_current_key_names(json::array()), json::array());  // no object: unchanged
}

}  // namespace
}  // namespace vlrnn::experiments
