// Cost models on disk (NOTE [ Cost models on disk ] in cost_model_cache.h): every field
// survives a file, a file for another key or in another format is not read, a corrupt one
// is ignored and rewritten, and a model on disk spares a process its measurement.
// Shapes: T steps, B sequences, F input features, H hidden.
#include "test_util.h"

#include "vlrnn/schedule/cost_measurement.h"
#include "vlrnn/schedule/cost_model_cache.h"
#include "vlrnn/schedule/planner_method.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

namespace vlrnn::schedule {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary one, removed at the end of the test.
struct TemporaryDir {
  fs::path path;
  explicit TemporaryDir(const std::string& name)
      : path(fs::temp_directory_path() /
             (name + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(std::random_device()()))) {
    fs::create_directories(path);
  }
  ~TemporaryDir() {
    std::error_code error;
    fs::remove_all(path, error);
  }
};

// Sets an environment variable for the test's duration, restoring it after.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> before;
  ScopedEnv(std::string variable, const std::optional<std::string>& value)
      : name(std::move(variable)) {
    if (const char* old = std::getenv(name.c_str())) before = old;
    set(value);
  }
  ~ScopedEnv() { set(before); }
  void set(const std::optional<std::string>& value) const {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
};

// A model with every field away from its default.
CostModel every_field_set() {
  auto m = CostModel::uniform(5, 1.0 / 3.0, 2e-7, 3.25, 1000, 150, 5000);
  m.step.forward_seconds[4] = 0.1;
  m.call.op_seconds = 1.5e-5;
  m.call.ended_seconds = 2.5e-6;
  m.call.tape_growth_seconds = 1e-9;
  m.step.tape_bytes[2] = 7;
  m.step.backward_transient_bytes[1] = 11;
  m.step.advance_transient_bytes[0] = 13;
  m.call.advance_op_bytes = 17;
  m.call.kept_tape_bytes = 23;
  m.backward.sums_bytes = 19;
  m.backward.later_bytes = 29;
  m.backward.floor_bytes = 61;
  m.iteration.gradient_bytes = 31;
  m.iteration.fixed_step_bytes = 53;  // of fixed_bytes 5000
  m.iteration.reversal_bytes = 67;    // of fixed_bytes 5000
  m.backward.window_steps = 2;
  m.backward.window_step_bytes = 59;
  m.active_sequences = {3, 3, 3, 2, 1};
  m.source = "measured on cpu (n = 4 and 12 steps)";
  m.check();
  return m;
}

// The file's text: equal texts, equal fields (every field is in it, by name).
std::string text_of(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CostModelCache, KeepsEveryFieldExactly) {
  TemporaryDir dir("vlrnn-cost-models");
  const auto model = every_field_set();
  ASSERT_TRUE(store_cost_model(dir.path, "key one", model));
  const auto loaded = load_cost_model(dir.path, "key one");
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->step.forward_seconds, model.step.forward_seconds);  // doubles bit for bit
  EXPECT_EQ(loaded->step.forward_grad_seconds, model.step.forward_grad_seconds);
  EXPECT_EQ(loaded->step.tape_bytes, model.step.tape_bytes);
  EXPECT_EQ(loaded->step.backward_transient_bytes, model.step.backward_transient_bytes);
  EXPECT_EQ(loaded->call.op_seconds, model.call.op_seconds);
  EXPECT_EQ(loaded->backward.later_bytes, 29);
  EXPECT_EQ(loaded->iteration.fixed_step_bytes, 53);
  EXPECT_EQ(loaded->backward.window_step_bytes, 59);
  EXPECT_EQ(loaded->backward.floor_bytes, 61);
  EXPECT_EQ(loaded->call.advance_op_bytes, 17);
  EXPECT_EQ(loaded->call.kept_tape_bytes, 23);
  EXPECT_EQ(loaded->iteration.reversal_bytes, 67);
  EXPECT_EQ(loaded->active_sequences, model.active_sequences);
  EXPECT_EQ(loaded->source, model.source);
  // Stored again, the loaded model writes the same text: nothing was lost on the way.
  ASSERT_TRUE(store_cost_model(dir.path, "key two", *loaded));
  auto first = text_of(cost_model_file(dir.path, "key one"));
  auto second = text_of(cost_model_file(dir.path, "key two"));
  EXPECT_EQ(first.substr(first.find("\nstep.forward_seconds")),
            second.substr(second.find("\nstep.forward_seconds")));
}

// What a hit costs: a model of T = 10000 steps (a variable-length batch's, every vector
// full) read back, timed (printed, not asserted: NOTE [ Cost models on disk ]).
TEST(CostModelCache, ReadsALongModelBack) {
  TemporaryDir dir("vlrnn-cost-models");
  auto model = CostModel::uniform(10000, 1.25e-5, 2.5e-5, 3.75e-5, 123456, 2048, 1 << 20);
  model.active_sequences.assign(10000, 16);
  model.active_sequences.back() = 15;
  ASSERT_TRUE(store_cost_model(dir.path, "long", model));
  const auto start = std::chrono::steady_clock::now();
  const auto loaded = load_cost_model(dir.path, "long");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->active_sequences, model.active_sequences);
  std::printf("[cost model cache] T = 10000: %lld bytes on disk, read in %.1f ms\n",
              (long long)fs::file_size(cost_model_file(dir.path, "long")), 1e3 * seconds);
}

TEST(CostModelCache, ReadsNoFileOfAnotherKeyOrFormat) {
  TemporaryDir dir("vlrnn-cost-models");
  EXPECT_FALSE(load_cost_model(dir.path, "never stored").has_value());
  ASSERT_TRUE(store_cost_model(dir.path, "key one", every_field_set()));
  // Two keys that hash to one file name: the key inside tells them apart.
  fs::create_directories(cost_model_file(dir.path, "key two").parent_path());
  fs::copy_file(cost_model_file(dir.path, "key one"), cost_model_file(dir.path, "key two"));
  EXPECT_FALSE(load_cost_model(dir.path, "key two").has_value());
  // Another format's file.
  auto text = text_of(cost_model_file(dir.path, "key one"));
  std::ofstream(cost_model_file(dir.path, "key one"))
      << "vlrnn cost model, format 0" << text.substr(text.find('\n'));
  EXPECT_FALSE(load_cost_model(dir.path, "key one").has_value());
}

// Whatever a file holds, loading it gives a valid model or none, never an error.
TEST(CostModelCache, IgnoresCorruptFiles) {
  TemporaryDir dir("vlrnn-cost-models");
  ASSERT_TRUE(store_cost_model(dir.path, "k", every_field_set()));
  const auto file = cost_model_file(dir.path, "k");
  const std::string good = text_of(file);
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> corruptions = {
      {"empty", ""},
      {"truncated", good.substr(0, good.size() / 2)},
      {"binary", std::string("\0\xff\x01garbage", 10)},
      {"a value not a number", replaced("op_seconds 1.5e-05", "op_seconds fast")},
      {"a negative value", replaced("op_seconds 1.5e-05", "op_seconds -1")},
      {"not finite", replaced("op_seconds 1.5e-05", "op_seconds nan")},
      {"a vector too short", replaced("tape_bytes 5 ", "tape_bytes 4 ")},
      {"a vector too long", replaced("tape_bytes 5 ", "tape_bytes 6 ")},
      {"a huge length", replaced("tape_bytes 5 ", "tape_bytes 99999999999 ")},
      {"a field missing", replaced("\niteration.fixed_bytes 5000", "")},
      {"a field twice", good + "iteration.fixed_bytes 5000\n"},
      {"an unknown field", good + "warp_factor 9\n"},
      {"counts that grow", replaced("active_sequences 5 3 3 3 2 1", "active_sequences 5 3 3 3 2 4")},
  };
  for (const auto& [what, text] : corruptions) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    std::optional<CostModel> loaded;
    EXPECT_NO_THROW(loaded = load_cost_model(dir.path, "k")) << what;
    EXPECT_FALSE(loaded.has_value()) << what;
  }
  std::ofstream(file, std::ios::trunc) << good;
  EXPECT_TRUE(load_cost_model(dir.path, "k").has_value());
}

// The folder keeps the most recently used files only: storing one past the bound removes
// the oldest, and a read makes a file recent again.
TEST(CostModelCache, KeepsTheMostRecentlyUsedFiles) {
  TemporaryDir dir("vlrnn-cost-models");
  const auto model = CostModel::uniform(3, 1, 1, 1, 10, 5);
  const auto set_age = [&](const std::string& key, int64_t seconds_ago) {
    fs::last_write_time(cost_model_file(dir.path, key),
                        fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
  };
  for (int64_t i = 0; i < 4; ++i) {
    const auto key = "key " + std::to_string(i);
    ASSERT_TRUE(store_cost_model(dir.path, key, model, 4));
    set_age(key, 100 - i);  // key 0 the oldest
  }
  ASSERT_TRUE(load_cost_model(dir.path, "key 0").has_value());  // now the most recent
  ASSERT_TRUE(store_cost_model(dir.path, "key 4", model, 4));
  EXPECT_TRUE(load_cost_model(dir.path, "key 0").has_value());
  EXPECT_FALSE(load_cost_model(dir.path, "key 1").has_value()) << "the oldest was kept";
  for (const auto* key : {"key 2", "key 3", "key 4"}) {
    EXPECT_TRUE(load_cost_model(dir.path, key).has_value()) << key;
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path / "cost-models")) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  EXPECT_EQ(files, 4u);
}

TEST(CostModelCache, FolderFromTheEnvironment) {
  const ScopedEnv home("HOME", "/home/someone");
  const ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  {
    const ScopedEnv cache("VLRNN_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cost_model_cache_dir(), fs::path("/home/someone/.cache/vlrnn"));
    const ScopedEnv xdg_set("XDG_CACHE_HOME", "/var/cache/me");
    EXPECT_EQ(cost_model_cache_dir(), fs::path("/var/cache/me/vlrnn"));
  }
  const ScopedEnv cache("VLRNN_CACHE_DIR", "/tmp/elsewhere");
  EXPECT_EQ(cost_model_cache_dir(), fs::path("/tmp/elsewhere"));
  const ScopedEnv off("VLRNN_CACHE_DIR", "off");
  EXPECT_FALSE(cost_model_cache_dir().has_value());
}

// A workload of its own shape (each test its own F: T is not part of the key), so that no
// other test has put its model in this process's cache.
struct CacheProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head = make_head("mse", 5, 2);
  SequenceBatch batch;
  CacheProblem(int64_t F, int64_t T, std::vector<int64_t> lengths = {})
      : model(make_model({"gru", F, 5, 1})) {
    batch.inputs = torch::randn({T, 2, F});   // [T, B, F]
    batch.targets = torch::randn({T, 2, 2});  // [T, B, 2]
    if (!lengths.empty()) batch.lengths = torch::tensor(lengths, torch::kLong);  // [B]
  }
  Workload workload() const { return validated(Workload{*model, *head, batch}); }
};

// What a previous process stored is what the next one plans with, unmeasured: a planted
// synthetic model comes back as it was.
TEST(CostModelCache, ASecondProcessReadsTheModelFromDisk) {
  TemporaryDir dir("vlrnn-cost-models");
  const ScopedEnv cache("VLRNN_CACHE_DIR", dir.path.string());
  torch::manual_seed(3);
  const CacheProblem problem(3, 37);
  const auto workload = problem.workload();
  auto planted = CostModel::uniform(37, 1, 2, 3, 400, 40, 900);
  planted.source = "planted by the test";
  ASSERT_TRUE(store_cost_model(dir.path, cost_model_key(workload), planted));
  const auto model = measured_cost_model(workload);
  EXPECT_EQ(model.source, "planted by the test");
  EXPECT_EQ(model.step.tape_bytes, planted.step.tape_bytes);
}

// NOTE [ Other batches of the workload ]: batches whose lengths differ share one model,
// priced for each batch's own lengths; a kept model measured where no sequence ends is
// replaced by the first batch that has an end.
TEST(CostModelCache, PricesAnotherBatchsLengthsWithoutMeasuring) {
  TemporaryDir dir("vlrnn-cost-models");
  const ScopedEnv cache("VLRNN_CACHE_DIR", dir.path.string());
  torch::manual_seed(3);
  const CacheProblem first(4, 19, {19, 7}), second(4, 19, {12, 19});
  // Another batch's lengths, one cost-model key.
  EXPECT_EQ(cost_model_key(first.workload()), cost_model_key(second.workload()));
  EXPECT_NE(workload_signature(first.workload()), workload_signature(second.workload()));
  auto planted = CostModel::uniform(19, 1, 2, 3, 400, 40, 900);
  planted.active_sequences = active_sequences_of(first.workload().batch);
  for (int64_t t = 7; t < 19; ++t) planted.step.tape_bytes[size_t(t)] = 200;  // one sequence
  planted.source = "planted by the test";
  ASSERT_TRUE(store_cost_model(dir.path, cost_model_key(first.workload()), planted));
  const auto priced = measured_cost_model(second.workload());
  EXPECT_NE(priced.source.find("planted by the test"), std::string::npos) << priced.source;
  EXPECT_EQ(priced.first_end(), 12);
  EXPECT_EQ(priced.step.tape_bytes[11], 400);
  EXPECT_EQ(priced.step.tape_bytes[12], 200);
  // Its own batch gets the model as it was.
  EXPECT_EQ(measured_cost_model(first.workload()).step.tape_bytes, planted.step.tape_bytes);
  // Measured where no sequence ends, a model cannot price ends: that batch is measured.
  torch::manual_seed(4);
  const CacheProblem no_end(5, 17, {17, 17}), with_end(5, 17, {17, 5});
  auto planted_no_end = CostModel::uniform(17, 1, 2, 3, 400, 40, 900);
  planted_no_end.active_sequences.assign(17, 2);
  planted_no_end.source = "planted, no end";
  ASSERT_TRUE(store_cost_model(dir.path, cost_model_key(no_end.workload()), planted_no_end));
  EXPECT_EQ(measured_cost_model(no_end.workload()).source, "planted, no end");
  const auto measured = measured_cost_model(with_end.workload());
  EXPECT_NE(measured.source.find("measured on"), std::string::npos) << measured.source;
  EXPECT_EQ(measured.first_end(), 5);
  const auto stored = load_cost_model(dir.path, cost_model_key(with_end.workload()));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->active_sequences, active_sequences_of(with_end.workload().batch));
}

// NOTE [ Other batches of the workload ]: batches padded to another number of steps share
// one model. A model measured on T steps prices shorter batches; a longer batch (T below
// kLongestMeasuredTape) is measured, and its model replaces the shorter one on disk.
TEST(CostModelCache, PricesABatchOfOtherStepsWithoutMeasuring) {
  TemporaryDir dir("vlrnn-cost-models");
  const ScopedEnv cache("VLRNN_CACHE_DIR", dir.path.string());
  torch::manual_seed(3);
  const CacheProblem measured_on(8, 40), shorter(8, 25), longer(8, 60);
  EXPECT_EQ(cost_model_key(measured_on.workload()), cost_model_key(shorter.workload()));
  EXPECT_NE(workload_signature(measured_on.workload()), workload_signature(shorter.workload()));
  auto planted = CostModel::uniform(40, 1, 2, 3, 400, 40, 900 + 40 * 10);
  planted.iteration.fixed_step_bytes = 10;
  planted.source = "planted by the test";
  ASSERT_TRUE(store_cost_model(dir.path, cost_model_key(measured_on.workload()), planted));
  const auto misses = cost_model_cache_misses();
  const auto priced = measured_cost_model(shorter.workload());
  EXPECT_EQ(cost_model_cache_misses(), misses + 1);  // read from disk, not measured
  EXPECT_NE(priced.source.find("planted by the test"), std::string::npos) << priced.source;
  EXPECT_EQ(priced.time_steps(), 25);
  EXPECT_EQ(priced.step.tape_bytes, std::vector<int64_t>(25, 400));
  EXPECT_EQ(priced.iteration.fixed_bytes, 900 + 25 * 10);
  EXPECT_EQ(measured_cost_model(measured_on.workload()).step.tape_bytes, planted.step.tape_bytes);
  EXPECT_EQ(cost_model_cache_misses(), misses + 1);  // from this process's cache
  // Longer than measured: measured on it, and stored in the shorter one's place.
  const auto measured = measured_cost_model(longer.workload());
  EXPECT_NE(measured.source.find("measured on"), std::string::npos) << measured.source;
  EXPECT_EQ(measured.time_steps(), 60);
  const auto stored = load_cost_model(dir.path, cost_model_key(longer.workload()));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->time_steps(), 60);
  EXPECT_EQ(measured_cost_model(shorter.workload()).time_steps(), 25);
  EXPECT_EQ(cost_model_cache_misses(), misses + 2);
}

// A mean is the sum divided once: both reductions share one key, and a model measured under
// either holds the same bytes, field by field (each file's lines but the key and the seconds).
TEST(CostModelCache, BothReductionsShareOneModel) {
  TemporaryDir dir("vlrnn-cost-models");
  torch::manual_seed(3);
  const CacheProblem problem(4, 23, {23, 9});
  auto workload_with = [&](Reduction reduction) {
    auto workload = problem.workload();
    workload.reduction = reduction;
    return workload;
  };
  const auto mean = workload_with(Reduction::kMean), sum = workload_with(Reduction::kSum);
  EXPECT_EQ(cost_model_key(mean), cost_model_key(sum));
  auto bytes_of = [&](const Workload& workload, const std::string& key) {
    EXPECT_TRUE(store_cost_model(dir.path, key, measure_cost_model(workload)));
    std::istringstream text(text_of(cost_model_file(dir.path, key)));
    std::string kept;
    for (std::string line; std::getline(text, line);) {
      if (line.rfind("key ", 0) != 0 && line.find("seconds") == std::string::npos) {
        kept += line + "\n";
      }
    }
    return kept;
  };
  const auto mean_bytes = bytes_of(mean, "mean"), sum_bytes = bytes_of(sum, "sum");
  EXPECT_NE(mean_bytes.find("step.tape_bytes"), std::string::npos) << mean_bytes;
  EXPECT_EQ(mean_bytes, sum_bytes);
}

// A corrupt file for the workload's key: measured again, and the file rewritten whole.
TEST(CostModelCache, ACorruptFileIsMeasuredAgainAndRewritten) {
  TemporaryDir dir("vlrnn-cost-models");
  const ScopedEnv cache("VLRNN_CACHE_DIR", dir.path.string());
  torch::manual_seed(3);
  const CacheProblem problem(6, 29);
  const auto workload = problem.workload();
  const auto key = cost_model_key(workload);
  fs::create_directories(cost_model_file(dir.path, key).parent_path());
  std::ofstream(cost_model_file(dir.path, key)) << "vlrnn cost model, format " << kCostModelFormat << "\nkey " << key
                                                << "\nforward_seconds 29 0.1 0.";
  const auto model = measured_cost_model(workload);
  EXPECT_EQ(model.time_steps(), 29);
  EXPECT_NE(model.source.find("measured"), std::string::npos) << model.source;
  const auto stored = load_cost_model(dir.path, key);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->step.tape_bytes, model.step.tape_bytes);
  EXPECT_EQ(stored->step.forward_seconds, model.step.forward_seconds);
}

// A folder that cannot be written (under a file) costs the next process its speed, nothing
// else.
TEST(CostModelCache, AnUnwritableFolderIsNoError) {
  TemporaryDir dir("vlrnn-cost-models");
  std::ofstream(dir.path / "a file") << "not a folder";
  EXPECT_FALSE(store_cost_model(dir.path / "a file", "k", every_field_set()));
  const ScopedEnv cache("VLRNN_CACHE_DIR", (dir.path / "a file").string());
  torch::manual_seed(3);
  const CacheProblem problem(7, 23);
  EXPECT_EQ(measured_cost_model(problem.workload()).time_steps(), 23);
}

}  // namespace
}  // namespace vlrnn::schedule
