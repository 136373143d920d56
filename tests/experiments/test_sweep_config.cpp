#include "test_util.h"

#include "lib/method_checks.h"
#include "lib/method_specs.h"
#include "lib/sweep_config.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/measure/environment.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;
using testing::expect_error_mentions;

SweepConfig parse(const std::string& text) { return parse_sweep_config(json::parse(text), "test"); }

TEST(SweepConfig, ATopLevelGridWithDefaults) {
  const auto config = parse(R"({"methods": ["full", "vlrnn"], "T": [64, 128], "batch": 2,
                                "block_length": [8, 16], "hidden": 8, "input": 4})");
  ASSERT_EQ(config.experiments.size(), 1u);
  const auto& e = config.experiments[0];
  EXPECT_EQ(e.name, "test");
  EXPECT_EQ(e.batches, std::vector<int64_t>{2});
  // A bare "vlrnn" becomes its block template.
  EXPECT_EQ(e.methods, (std::vector<std::string>{"full", "vlrnn:block_length={K}"}));
  const auto points = expand_points(config);
  // Per T: full once (K null) + vlrnn at K = 8 and 16.
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].method, "full");
  EXPECT_EQ(points[0].block, 0);
  EXPECT_EQ(points[1].method, "vlrnn:block_length=8");
  EXPECT_EQ(points[1].block, 8);
  EXPECT_EQ(points[2].method, "vlrnn:block_length=16");
  EXPECT_EQ(points[3].problem.time_steps, 128);
  std::set<std::string> keys;
  for (const auto& p : points) keys.insert(p.key);
  EXPECT_EQ(keys.size(), points.size());
}

TEST(SweepConfig, ExperimentsInheritTheTopLevelAndOverrideIt) {
  const auto config = parse(R"({"hidden": 8, "repeats": 2, "methods": "all", "block_length": [4],
    "experiments": [{"name": "a", "T": 32}, {"name": "b", "T": 16, "repeats": 1,
                     "methods": ["vlrnn:block_length={N}"], "block_length": [4, 8]}]})");
  ASSERT_EQ(config.experiments.size(), 2u);
  EXPECT_EQ(config.experiments[0].repeats, 2);
  EXPECT_EQ(config.experiments[1].repeats, 1);
  EXPECT_EQ(config.experiments[0].hidden_sizes, std::vector<int64_t>{8});
  // "all" is whatever the registry holds that takes the model (lstm here: every method but
  // bivlrnn), so methods added later join by themselves.
  const auto names = method_names();
  EXPECT_EQ(config.experiments[0].methods.size(),
            size_t(std::count_if(names.begin(), names.end(), handles_left_to_right)));
  EXPECT_EQ(std::count(names.begin(), names.end(), "bivlrnn"), 1);
  const auto points = expand_points(config);
  // {N} = ceil(T / K): T = 16 with K = 4 and 8 gives 4 and 2 blocks.
  EXPECT_EQ(points[points.size() - 2].method, "vlrnn:block_length=4");
  EXPECT_EQ(points.back().method, "vlrnn:block_length=2");
}

// "all" on bidirectional kinds: the methods that take them, the planner (bivlrnn under its
// budget) included; "bi:<kind>" of any left-to-right kind is a model.
TEST(SweepConfig, AllOnBidirectionalKindsIsTheMethodsThatTakeThem) {
  const auto config = parse(R"({"models": ["bi:lstm", "bigru", "bi:ssm"], "methods": "exact",
                                "T": 16, "hidden": 4, "input": 3})");
  EXPECT_EQ(config.experiments[0].methods,
            (std::vector<std::string>{"full", "checkpoint", "planner", "bivlrnn"}));
  EXPECT_EQ(config.experiments[0].models, (std::vector<std::string>{"bi:lstm", "bigru", "bi:ssm"}));
}

TEST(SweepConfig, TheHashIsTheGridNotTheFormatting) {
  const auto a = parse(R"({"T": [64, 128], "batch": 2})");
  const auto b = parse(R"({ "batch" : 2,
                            "T" : [64, 128] })");
  EXPECT_EQ(config_hash(a), config_hash(b));
  EXPECT_EQ(config_hash(a).size(), 16u);
  EXPECT_NE(config_hash(a), config_hash(parse(R"({"T": [64, 128], "batch": 3})")));
  EXPECT_NE(config_hash(a), config_hash(parse_sweep_config(a.raw, "another_name")));
}

TEST(SweepConfig, MaxBatchNeedsABudget) {
  const auto config = parse(R"({"experiments": [{"kind": "max_batch", "budget_mib": 1.5,
                                  "methods": ["full"], "batch_start": 2}]})");
  EXPECT_EQ(config.experiments[0].budget_bytes, 1572864);
  const auto points = expand_points(config);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].problem.batch, 2);
  expect_error_mentions([] { parse(R"({"experiments": [{"kind": "max_batch"}]})"); },
                        {"$.experiments[0].budget_mib", "budget"});
  expect_error_mentions([] { parse(R"({"experiments": [{"budget_mib": 3}]})"); },
                        {"$.experiments[0].budget_mib", "max_batch"});
}

TEST(SweepConfig, UntilStableReachesTheExperiment) {
  const auto config = parse(R"({"until_stable": 0.05, "repeats": 3, "max_repeats": 12})");
  EXPECT_DOUBLE_EQ(config.experiments[0].until_stable, 0.05);
  EXPECT_EQ(config.experiments[0].max_repeats, 12);
}

TEST(SweepConfig, ErrorsNameTheJsonPathAndTheReason) {
  expect_error_mentions([] { parse(R"({"Tee": [1]})"); }, {"$.Tee", "unknown key", "T, batch"});
  expect_error_mentions([] { parse(R"({"experiments": [{"T": [16, "long"]}]})"); },
                        {"$.experiments[0].T[1]", "integer", "a string"});
  expect_error_mentions([] { parse(R"({"experiments": [{}, {"batch": 0}]})"); },
                        {"$.experiments[1].batch", ">= 1", "0"});
  expect_error_mentions([] { parse(R"({"methods": ["full", "nosuch"]})"); },
                        {"$.methods[1]", "nosuch", "known methods", "vlrnn"});
  expect_error_mentions([] { parse(R"({"methods": ["vlrnn:blok=3"]})"); },
                        {"$.methods[0]", "blok"});
  expect_error_mentions([] { parse(R"({"methods": ["vlrnn:block_length={K}"]})"); },
                        {"$.block_length", "block length"});
  // "block" (before "block_length") fails naming the new key, at the top and in an experiment.
  expect_error_mentions([] { parse(R"({"block": [8]})"); },
                        {"$.block", "renamed to \"block_length\""});
  expect_error_mentions([] { parse(R"({"experiments": [{"block": [8]}]})"); },
                        {"$.experiments[0].block", "renamed to \"block_length\""});
  expect_error_mentions([] { parse(R"({"models": ["lstm", "transformer"]})"); },
                        {"$.models[1]", "transformer", "gru"});
  expect_error_mentions([] { parse(R"({"models": ["bi:transformer"]})"); },
                        {"$.models[0]", "bi:transformer", "known kinds", "bi:<kind>"});
  expect_error_mentions([] { parse(R"({"models": ["bi:bilstm"]})"); },
                        {"$.models[0]", "bi:bilstm", "left-to-right"});
  // A method that does not take a model of the experiment is named with the ones that do.
  expect_error_mentions([] { parse(R"({"models": ["bilstm"], "methods": ["full", "vlrnn"]})"); },
                        {"$.methods[1]", "vlrnn", "bidirectional", "bilstm", "bivlrnn"});
  expect_error_mentions([] { parse(R"({"models": "mingru", "methods": ["bivlrnn"]})"); },
                        {"$.methods", "bivlrnn", "left-to-right", "mingru"});
  expect_error_mentions([] { parse(R"({"dtype": "float16"})"); }, {"$.dtype", "float32", "float16"});
  expect_error_mentions([] { parse(R"({"gradient_error": 1})"); }, {"$.gradient_error", "true or false"});
  expect_error_mentions([] { parse(R"({"figures": ["memory_vs_t"]})"); },
                        {"$.figures[0]", "memory_vs_T", "memory_vs_t"});
  expect_error_mentions([] { parse(R"({"block_options": {"vlrnn": "block_length=8"}})"); },
                        {"$.block_options.vlrnn", "{K}"});
  expect_error_mentions([] { parse(R"({"experiments": [{"name": "x"}, {"name": "x"}]})"); },
                        {"$.experiments[1].name", "duplicate"});
  expect_error_mentions([] { parse(R"([1, 2])"); }, {"$", "object"});
  expect_error_mentions([] { parse(R"({"until_stable": 2})"); }, {"$.until_stable", "fraction"});
  expect_error_mentions([] { parse(R"({"until_stable": 0.05, "repeats": 5, "max_repeats": 3})"); },
                        {"$.max_repeats", ">= repeats (5)", "3"});
  // A model file gives its own model and sizes: nothing beside it may say otherwise (checked
  // before the file is read, so the path need not exist).
  expect_error_mentions([] { parse(R"({"model_file": "cell.pt", "models": ["lstm"]})"); },
                        {"$.models", "model_file", "no \"models\""});
  expect_error_mentions(
      [] { parse(R"({"experiments": [{"model_file": "cell.pt", "hidden": [8]}]})"); },
      {"$.experiments[0].hidden", "model_file"});
  if (!measure::built_with_cuda()) {
    expect_error_mentions([] { parse(R"({"device": "cuda"})"); }, {"$.device", "CUDA build"});
  }
}

TEST(SweepConfig, LoadsAFileAndNamesItAfterTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "vlrnn_test_cfg.json";
  {
    std::ofstream out(path);
    out << "{\n  // comments are allowed\n  \"methods\": [\"full\"], \"T\": 8\n}\n";
  }
  const auto config = load_sweep_config(path.string());
  EXPECT_EQ(config.name, "vlrnn_test_cfg");
  EXPECT_EQ(config.path, path.string());
  std::filesystem::remove(path);
  expect_error_mentions([] { load_sweep_config("/nonexistent/x.json"); }, {"cannot read", "x.json"});
}

// The committed configs must load (paper.json names a CUDA device: only in CUDA builds).
TEST(SweepConfig, TheCommittedQuickConfigLoads) {
  const std::string path = std::string(VLRNN_SOURCE_DIR) + "/experiments/configs/quick.json";
  const auto config = load_sweep_config(path);
  EXPECT_EQ(config.name, "quick");
  EXPECT_GT(expand_points(config).size(), 10u);
}

// `vlrnn sweep --device`: one device for every experiment, whatever the file says, so
// paper.json (which names CUDA) runs on a CPU-only build; the config recorded says so.
TEST(SweepConfig, ADeviceGivenReplacesEveryExperimentsDevice) {
  const std::string path = std::string(VLRNN_SOURCE_DIR) + "/experiments/configs/paper.json";
  const auto config = load_sweep_config(path, "cpu");
  ASSERT_FALSE(config.experiments.empty());
  for (const auto& e : config.experiments) EXPECT_EQ(e.device, "cpu") << e.name;
  EXPECT_EQ(config.raw["device"], "cpu");
  for (const auto& point : expand_points(config)) EXPECT_TRUE(point.problem.device.is_cpu());
}

TEST(MethodSpecs, SplitsListsKeepingMultiOptionSpecsTogether) {
  EXPECT_EQ(split_method_list("full,vlrnn:block_length=64,tbptt:k1=8,k2=16,checkpoint"),
            (std::vector<std::string>{"full", "vlrnn:block_length=64", "tbptt:k1=8,k2=16", "checkpoint"}));
  EXPECT_EQ(split_method_list(" full , vlrnn "), (std::vector<std::string>{"full", "vlrnn"}));
  expect_error_mentions([] { split_method_list("full,,vlrnn"); }, {"methods", "empty"});
  EXPECT_EQ(substitute_block("x:a={K},b={N}", 10, 95), "x:a=10,b=10");
  EXPECT_TRUE(uses_block("vlrnn:block_length={K}"));
  EXPECT_FALSE(uses_block("vlrnn:block_length=3"));
  expect_error_mentions([] { check_method_specs({"full", "bogus"}); }, {"bogus", "known methods"});
}

// Found by the method_spec fuzz target (tests/fuzz/): ceil(T / K) computed as
// (T + K - 1) / K overflowed for a T near INT64_MAX, which a sweep config accepts.
TEST(MethodSpecs, SubstitutesTheBlockCountAtTheLargestT) {
  EXPECT_EQ(substitute_block("checkpoint:segments={N}", 3, INT64_MAX),
            "checkpoint:segments=3074457345618258603");
  EXPECT_EQ(substitute_block("x:a={K},b={N}", INT64_MAX, INT64_MAX),
            "x:a=9223372036854775807,b=1");
  EXPECT_EQ(substitute_block("x:b={N}", 2, INT64_MAX - 1), "x:b=4611686018427387903");
}

// Found while writing the fuzz targets: a size of 1e300 MiB overflowed the byte count, and
// a positive size below half a byte rounded to 0 bytes ("no limit").
TEST(SweepConfig, MemorySizesOutOfRangeNameTheKey) {
  expect_error_mentions([] { parse(R"({"memory_limit_mib": 1e300, "methods": "full"})"); },
                        {"$.memory_limit_mib", "4 EiB", "1e+300"});
  expect_error_mentions([] { parse(R"({"memory_limit_mib": 1e-9, "methods": "full"})"); },
                        {"$.memory_limit_mib", "1 byte"});
  expect_error_mentions([] {
    parse(R"({"kind": "max_batch", "budget_mib": 1e300, "methods": "full"})");
  }, {"$.budget_mib", "4 EiB"});
  EXPECT_EQ(parse(R"({"memory_limit_mib": 0.5, "methods": "full"})").memory_limit_bytes, 524288);
}

}  // namespace
}  // namespace vlrnn::experiments
