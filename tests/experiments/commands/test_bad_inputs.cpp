// Every `vlrnn` subcommand, given bad flags, bad config values, a missing file or an
// unwritable output, prints a clear error naming the argument in one style ("vlrnn: error:
// ..." and exit code 2, CLI11's parse errors included): never an abort, a core dump or a
// C++ backtrace. The command lines run in this process, through run_command_line() (all the
// tool's main does), with stdout and stderr caught in a file: starting the tool once per
// case would spend a second each loading LibTorch.
#include "test_util.h"

#include "commands/run_command_line.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlrnn::cli {
namespace {

namespace fs = std::filesystem;

struct CommandRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr, as a terminal would show them
};

// Points stdout and stderr at `file` and the working folder at `folder` while alive.
class CaughtOutput {
 public:
  CaughtOutput(const fs::path& file, const fs::path& folder) : cwd_(fs::current_path()) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw std::runtime_error("cannot write the caught output to " + file.string());
    fs::current_path(folder);  // before the redirection: if it throws, nothing is left redirected
    flush();
    saved_out_ = ::dup(STDOUT_FILENO);
    saved_err_ = ::dup(STDERR_FILENO);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~CaughtOutput() {
    flush();
    ::dup2(saved_out_, STDOUT_FILENO);
    ::dup2(saved_err_, STDERR_FILENO);
    ::close(saved_out_);
    ::close(saved_err_);
    fs::current_path(cwd_);
  }
  CaughtOutput(const CaughtOutput&) = delete;
  CaughtOutput& operator=(const CaughtOutput&) = delete;

 private:
  static void flush() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
  }
  fs::path cwd_;
  int saved_out_ = -1, saved_err_ = -1;
};

// `vlrnn ARGS...` run from the source folder, as a user there would type it.
CommandRun run_vlrnn(const std::vector<std::string>& args, const fs::path& caught) {
  std::vector<std::string> words = {"vlrnn"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  CommandRun run;
  {
    const CaughtOutput caught_output(caught, VLRNN_SOURCE_DIR);
    run.exit_code = run_command_line(static_cast<int>(words.size()), argv.data());
  }
  std::ifstream in(caught);
  run.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

class BadInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = testing::fresh_test_folder("vlrnn_bad_inputs_");
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  // A file of the work folder holding `text`; its path.
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(work_ / name) << text << "\n";
    return path(name);
  }
  std::string path(const std::string& name) const { return (work_ / name).string(); }

  CommandRun run(const std::vector<std::string>& args) const {
    return run_vlrnn(args, work_ / "output.txt");
  }

  // `vlrnn ARGS...` fails in the one error style, and its output mentions `fragment`.
  void expect_error(const std::string& fragment, const std::vector<std::string>& args) const {
    std::string line = "vlrnn";
    for (const auto& arg : args) line += " " + arg;
    SCOPED_TRACE(line);
    const auto got = run(args);
    EXPECT_EQ(got.exit_code, 2) << "the one error style exits 2\n" << got.output;
    EXPECT_TRUE(got.output.rfind("vlrnn: error: ", 0) == 0 ||
                got.output.find("\nvlrnn: error: ") != std::string::npos)
        << "no 'vlrnn: error: ' line\n" << got.output;
    for (const char* crash : {"frame #", "Exception raised from", "terminate called",
                              "core dumped", "Aborted"}) {
      EXPECT_EQ(got.output.find(crash), std::string::npos)
          << "a crash or a backtrace in the output\n" << got.output;
    }
    EXPECT_NE(got.output.find(fragment), std::string::npos)
        << "no mention of '" << fragment << "'\n" << got.output;
  }

  fs::path work_;
  const std::string unwritable_ = "/proc/vlrnn-cannot-write-here";
  const std::string one_case_ = "rnnx1/ce/sum/f64/h0=grad/T=28 vlrnn:block_length=7";
};

TEST_F(BadInputs, Verify) {
  expect_error("subcommand", {"nosuchcommand"});
  expect_error("--bogus", {"verify", "--bogus"});
  expect_error("--random", {"verify", "--random", "x"});
  expect_error("--filter", {"verify", "--filter", "no-case-has-this-name"});
  expect_error("--random", {"verify", "--random-case", "5", "--random", "3"});
  expect_error("--json", {"verify", "--filter", one_case_, "--json", unwritable_ + "/x.json"});
  expect_error("--out", {"verify", "--filter", one_case_, "--out", unwritable_});
  expect_error("--bogus", {"methods", "--bogus"});
}

TEST_F(BadInputs, Compare) {
  const std::vector<std::string> small = {"--T", "8", "--hidden", "4"};
  auto with_small = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return args;
  };
  expect_error("model", with_small({"compare", "--model", "nosuch"}));
  expect_error("T", {"compare", "--T", "0"});
  expect_error("batch", {"compare", "--batch", "-1"});
  expect_error("--hidden", {"compare", "--hidden", "abc"});
  expect_error("--T = abc", {"compare", "--T", "abc"});
  expect_error("GiB available", {"compare", "--T", "100", "--batch", "100000000"});
  expect_error("vlrnn block", with_small({"compare", "--methods", "vlrnn:block_length=0"}));
  expect_error("nosuch", with_small({"compare", "--methods", "nosuch"}));
  expect_error("block", with_small({"compare", "--methods", "vlrnn:block_length=x"}));
  // The old spellings of the block options name their new ones.
  expect_error("option 'block' is now 'block_length' (a length in steps)",
               with_small({"compare", "--methods", "vlrnn:block=8"}));
  expect_error("option 'blocks' is now 'num_blocks' (a count of blocks)",
               with_small({"compare", "--methods", "vlrnn:blocks=2"}));
  expect_error("dtype", with_small({"compare", "--dtype", "float16"}));
  expect_error("METHOD@KIND", with_small({"compare", "--methods", "full,full@"}));
  expect_error("nosuch", with_small({"compare", "--methods", "full,full@nosuch"}));
  expect_error("models lstm and gru", with_small({"compare", "--methods", "full,full@gru"}));
  const auto bad_kind = file("bad_kind.json", R"({"name": "bad", "experiments": [{"kind": "nosuch"}]})");
  expect_error("found none", with_small({"compare", "--plan", bad_kind}));
  const auto broken = file("broken.json", "{not json");
  expect_error("broken.json", with_small({"compare", "--plan", broken}));
  const auto plan4 = file("plan4.json",
                          R"json({"time_steps": 4, "ops": ["forward_grad(0, 4)", "backward(0, 4)"]})json");
  expect_error("recorded for T = 4", with_small({"compare", "--plan", plan4}));
  expect_error("--plan", {"train", bad_kind, "--plan", path("nosuch.json")});
  expect_error("--repeats", with_small({"compare", "--repeats", "0"}));
  expect_error("--json",
               with_small({"compare", "--batch", "2", "--json", unwritable_ + "/x.json"}));
  expect_error("--threads", with_small({"compare", "--threads", "0"}));
  expect_error("--until-stable", with_small({"compare", "--until-stable", "2"}));
  expect_error("--max-repeats", with_small({"compare", "--until-stable", "0.05",
                                            "--max-repeats", "2", "--repeats", "5"}));
}

TEST_F(BadInputs, SweepMergeAndBudget) {
  const std::string quick = "experiments/configs/quick.json";
  const auto bad_kind = file("bad_kind.json", R"({"name": "bad", "experiments": [{"kind": "nosuch"}]})");
  const auto bad_value =
      file("bad_value.json", R"({"name": "bad", "experiments": [{"kind": "grid", "T": [-4]}]})");
  const auto broken = file("broken.json", "{not json");
  const auto old_block = file("old_block.json", R"({"name": "old", "experiments": [{"block": [8]}]})");
  expect_error("config is required", {"sweep"});
  expect_error("does not exist", {"sweep", path("missing.json")});
  expect_error("not valid JSON", {"sweep", broken, "--out", path("o1")});
  expect_error("kind", {"sweep", bad_kind, "--out", path("o2")});
  expect_error("T", {"sweep", bad_value, "--out", path("o3")});
  expect_error(R"(renamed to "block_length")", {"sweep", old_block, "--out", path("o3b")});
  expect_error("--out", {"sweep", quick, "--out", unwritable_, "--allow-dirty"});
  expect_error("--shard", {"sweep", quick, "--shard", "3/3", "--out", path("o4")});
  expect_error("--shard", {"sweep", quick, "--shard", "x", "--out", path("o5")});
  expect_error("--blas-threads", {"sweep", quick, "--blas-threads", "-1", "--dry-run"});
  expect_error("out is required", {"merge"});
  expect_error("merge DIR", {"merge", path("merged"), path("missing-shard")});
  expect_error("T", {"budget", "--T", "0"});
  expect_error("--fractions", {"budget", "--T", "16", "--fractions", "x"});
  expect_error("--fractions", {"budget", "--T", "16", "--fractions", "0"});
  expect_error("--methods", {"budget", "--T", "16", "--methods", "planner,nosuch"});
}

// One --device on every command that runs a model; no machine has a 100th GPU, and a build
// without CUDA says so.
TEST_F(BadInputs, Device) {
  const std::vector<std::vector<std::string>> commands = {
      {"verify", "--filter", "rnnx1"},
      {"compare", "--T", "8", "--hidden", "4"},
      {"budget", "--T", "16"},
      {"sweep", "experiments/configs/quick.json", "--dry-run"},
      {"train", "experiments/configs/train-copy.json"}};
  for (auto args : commands) {
    args.insert(args.end(), {"--device", "cuda:99"});
    expect_error(R"(--device: "cuda:99")", args);
  }
  expect_error("--device", {"verify", "--device", "tpu"});
}

// Plugins and model files (lib/user_models.h): a missing file, a file that is no shared
// library or TorchScript module, a library without the entry point.
TEST_F(BadInputs, PluginsAndModelFiles) {
  Dl_info libc{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&std::fflush), &libc), 0);
  const auto broken = file("broken.json", "{not json");
  const auto bad_model_file =
      file("bad_model_file.json", R"({"name": "bad", "model_file": "/nonexistent/cell.pt"})");
  expect_error("does not exist", {"verify", "--plugin", path("missing.so"), "--model", "indrnn"});
  expect_error("cannot load plugin", {"verify", "--plugin", broken, "--model", "indrnn"});
  expect_error("has no symbol vlrnn_register_plugin",
               {"compare", "--plugin", libc.dli_fname, "--T", "8", "--hidden", "4"});
  expect_error("unknown kind", {"verify", "--model", "nosuch"});
  expect_error("cannot read", {"verify", "--model-file", path("missing.pt")});
  expect_error("torch::jit::load failed", {"compare", "--model-file", broken, "--T", "8"});
  expect_error("model_file", {"sweep", bad_model_file, "--out", path("o6"), "--allow-dirty"});
}

TEST_F(BadInputs, Train) {
  auto train = [&](const std::string& config, const std::string& out) {
    return std::vector<std::string>{"train", config, "--out", path(out), "--allow-dirty"};
  };
  expect_error("methods[0]",
               train(file("bad_method.json",
                          R"({"task": {"kind": "copy", "delay": 4}, "methods": ["nosuch"]})"),
                     "t1"));
  expect_error("task.delay",
               train(file("no_delay.json", R"({"task": {"kind": "copy"}, "methods": ["full"]})"),
                     "t2"));
  expect_error("cannot read the text file",
               train(file("no_text.json", R"({"task": {"kind": "text", "path": "/no/such.txt",
                                                       "time_steps": 8}, "methods": ["full"]})"),
                     "t3"));
  expect_error("apt-get install dataset-fashion-mnist",
               train(file("no_fmnist.json", R"({"task": {"kind": "fashion_mnist",
                                                         "path": "/no/such/fmnist"},
                                                "methods": ["full"]})"),
                     "t3b"));
  expect_error("optimizer.lr",
               train(file("bad_lr.json", R"({"task": {"kind": "adding", "time_steps": 8},
                                             "methods": ["full"], "optimizer": {"lr": -1}})"),
                     "t4"));
  // "steps", the older name of both counts, names the new key of each.
  expect_error(R"(config steps: renamed to "optimizer_steps")",
               train(file("old_steps.json", R"({"task": {"kind": "adding", "time_steps": 8},
                                                "methods": ["full"], "steps": 2})"),
                     "t4b"));
  expect_error(R"(config task.steps: renamed to "task.time_steps")",
               train(file("old_task_steps.json", R"({"task": {"kind": "adding", "steps": 8},
                                                     "methods": ["full"], "optimizer_steps": 2})"),
                     "t4c"));
  expect_error("GiB available",
               train(file("huge_batch.json", R"({"task": {"kind": "adding", "time_steps": 100},
                                                 "methods": ["full"], "batch": 100000000})"),
                     "t6"));
  expect_error("config", {"train", path("missing.json")});
}

// --resume takes the folder of the same config, and only that: a folder trained before the
// "steps" rename (meta.json's config in the old keys) is the same config as its rewrite in
// the new ones.
TEST_F(BadInputs, TrainResume) {
  const auto ok = file("ok.json", R"({"task": {"kind": "adding", "time_steps": 8},
                                      "methods": ["full"], "optimizer_steps": 2})");
  const auto other = file("other.json", R"({"task": {"kind": "adding", "time_steps": 8},
                                            "methods": ["vlrnn"], "optimizer_steps": 2})");
  const auto first = run({"train", ok, "--out", path("t5"), "--allow-dirty"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  expect_error("different config",
               {"train", other, "--out", path("t5"), "--resume", "--allow-dirty"});
  const auto meta_path = work_ / "t5" / "meta.json";
  auto meta = nlohmann::json::parse(std::ifstream(meta_path));
  auto& config = meta["config"];
  config["steps"] = config["optimizer_steps"];
  config.erase("optimizer_steps");
  config["task"]["steps"] = config["task"]["time_steps"];
  config["task"].erase("time_steps");
  std::ofstream(meta_path) << meta.dump();
  const auto resumed = run({"train", ok, "--out", path("t5"), "--resume", "--allow-dirty"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

}  // namespace
}  // namespace vlrnn::cli
