// Plans you can keep (experiments/lib/recorded_plan.h): a planner's plan as its record
// holds it, read back from any file that holds it, and run again with bit-identical
// gradients. Shapes: T steps, B sequences, F input features, H hidden.
#include "lib/recorded_plan.h"

#include "lib/method_runner.h"
#include "lib/problem.h"

#include "test_util.h"

#include "vlrnn/registry/methods.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace vlrnn::experiments {
namespace {

using nlohmann::json;
using testing::expect_error_mentions;

constexpr int64_t kPlanSteps = 40;

Problem plan_problem(int64_t T = kPlanSteps) {
  ProblemSpec spec;
  spec.model = "lstm";
  spec.input_size = 3;
  spec.hidden_size = 5;
  spec.head_outputs = 2;
  spec.time_steps = T;
  spec.batch = 3;
  spec.dtype = torch::kFloat64;
  return make_problem(spec);
}

// A planner whose synthetic costs make a taped step dear and a stored state cheap, so under
// this budget it recomputes; the real (tiny) peak fits the same budget, so the measured
// check passes without planning again.
schedule::PlannerMethod recomputing_planner() {
  schedule::PlannerOptions options;
  options.budget_bytes = 100'000'000;
  options.cost_model = schedule::CostModel::uniform(kPlanSteps, 1.0, 1.2, 2.0, 10'000'000, 1'000);
  return schedule::PlannerMethod(options);
}

std::vector<torch::Tensor> gradients_of(const Problem& problem, GradientMethod& method) {
  for (auto& p : problem.model->parameters()) p.mutable_grad() = torch::Tensor();
  for (auto& p : problem.head->parameters()) p.mutable_grad() = torch::Tensor();
  method.compute(problem.workload());
  std::vector<torch::Tensor> out;
  for (auto& p : problem.model->parameters()) out.push_back(p.grad().clone());
  for (auto& p : problem.head->parameters()) out.push_back(p.grad().clone());
  return out;
}

std::string write_temp_file(const std::string& name, const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(RecordedPlan, RecordHoldsTheOpsAndTheCostsTheyWereChosenFrom) {
  const auto problem = plan_problem();
  auto planner = recomputing_planner();
  planner.prepare(problem.workload());
  const auto record = plan_json(planner);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["time_steps"], kPlanSteps);
  EXPECT_EQ(record["ops"].size(), planner.current_plan().schedule.ops.size());
  EXPECT_GT(record["predicted"]["forward_no_grad_steps"].get<int64_t>(), 0);  // it recomputes
  EXPECT_EQ(record["budget_bytes"], 100'000'000);
  // Per-step vectors run-length encoded: every step costs the same, so one run of T.
  EXPECT_EQ(record["cost_model"]["step"]["tape_bytes"],
            json::array({json::array({10'000'000, kPlanSteps})}));
  EXPECT_EQ(record["cost_model"]["call"]["op_seconds"], 0.0);
}

TEST(RecordedPlan, RepeatsAPlannerRunWithIdenticalGradients) {
  const auto problem = plan_problem();
  auto planner = recomputing_planner();
  const auto planned = gradients_of(problem, planner);
  // Through the record's text, as a file would carry it.
  const auto text = json{{"records", {{{"method", "planner"}, {"plan", plan_json(planner)}}}}}.dump();
  const auto path = write_temp_file("vlrnn_test_recorded_plan.json", text);
  RecordedPlanMethod replay(read_plan_file(path), path);
  EXPECT_EQ(replay.plan().ops, planner.current_plan().schedule.ops);
  const auto repeated = gradients_of(problem, replay);
  ASSERT_EQ(planned.size(), repeated.size());
  for (size_t i = 0; i < planned.size(); ++i) EXPECT_TRUE(torch::equal(planned[i], repeated[i])) << i;
  std::remove(path.c_str());
}

TEST(RecordedPlan, ReadsAPlanFromAnyRecordFile) {
  const auto problem = plan_problem();
  auto planner = recomputing_planner();
  planner.prepare(problem.workload());
  const auto plan = plan_json(planner);
  // A results.jsonl: one record per line, the same plan in two of them.
  const auto jsonl =
      write_temp_file("vlrnn_test_plan.jsonl", json{{"plan", plan}}.dump() + "\n" +
                                                   json{{"method", "full"}}.dump() + "\n\n" +
                                                   json{{"plan", plan}}.dump() + "\n");
  EXPECT_EQ(read_plan_file(jsonl).ops, planner.current_plan().schedule.ops);
  // A bare plan object.
  const auto bare = write_temp_file("vlrnn_test_plan_bare.json", plan.dump());
  EXPECT_EQ(read_plan_file(bare).time_steps, kPlanSteps);
  std::remove(jsonl.c_str());
  std::remove(bare.c_str());
}

TEST(RecordedPlan, NamesWhatIsWrongWithAPlanFile) {
  expect_error_mentions([] { read_plan_file("/nonexistent/plan.json"); },
                        {"--plan /nonexistent/plan.json", "cannot read"});
  const auto none =
      write_temp_file("vlrnn_test_plan_none.json", R"json({"records": [{"method": "full"}]})json");
  expect_error_mentions([&] { read_plan_file(none); }, {"--plan", "found none"});
  const auto two = write_temp_file(
      "vlrnn_test_plan_two.jsonl",
      R"json({"plan": {"time_steps": 2, "ops": ["forward_grad(0, 2)", "backward(0, 2)"]}})json"
      "\n"
      R"json({"plan": {"time_steps": 3, "ops": ["forward_grad(0, 3)", "backward(0, 3)"]}})json"
      "\n");
  expect_error_mentions([&] { read_plan_file(two); }, {"expected one plan, found 2"});
  const auto bad_op =
      write_temp_file("vlrnn_test_plan_bad_op.json",
                      R"json({"time_steps": 2, "ops": ["forward_grad(0, 2)", "back(0, 2)"]})json");
  expect_error_mentions([&] { read_plan_file(bad_op); }, {"ops[1]", "\"back(0, 2)\""});
  const auto invalid =
      write_temp_file("vlrnn_test_plan_invalid.json",
                      R"json({"time_steps": 2, "ops": ["forward_grad(0, 2)"]})json");
  expect_error_mentions([&] { read_plan_file(invalid); }, {"never back-propagated"});
  for (const auto& path : {none, two, bad_op, invalid}) std::remove(path.c_str());
}

TEST(RecordedPlan, RunsOnlyOnItsOwnLength) {
  schedule::Schedule plan;
  plan.time_steps = kPlanSteps;
  plan.name = "whole";
  plan.ops = {schedule::Op::forward_grad(0, kPlanSteps), schedule::Op::backward(0, kPlanSteps)};
  RecordedPlanMethod method(plan, "test");
  const auto longer = plan_problem(kPlanSteps + 1);
  expect_error_mentions([&] { method.compute(longer.workload()); },
                        {"recorded for T = 40", "T = 41"});
}

// Registering "plan" changes the process-wide registry, which other tests list and run on
// problems of other lengths: it runs in a child process (a death test), as every addition
// does (tests/registry/test_add.cpp), and reports what failed on stderr.
TEST(RecordedPlanDeathTest, RunsAsMethodPlanAndIsRecorded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto problem = plan_problem();
  auto planner = recomputing_planner();
  planner.prepare(problem.workload());
  const auto path = write_temp_file("vlrnn_test_plan_method.json", plan_json(planner).dump());
  EXPECT_EXIT(
      {
        std::string failed;
        const auto expect = [&](bool ok, const char* what) {
          if (!ok) failed += std::string(what) + "; ";
        };
        expect(add_plan_method(path).time_steps == kPlanSteps, "the plan's T");
        try {
          add_plan_method(path);
          expect(false, "a second plan refused");
        } catch (const c10::Error& e) {
          expect(std::string(e.what()).find("\"plan\" is already registered") !=
                     std::string::npos,
                 "a second plan refused, saying why");
        }
        RunOptions once;
        once.warmup = 0;
        once.repeats = 1;
        const auto runs = run_methods(problem, {"full", "plan"}, once);
        expect(runs[1].status == "ok", "method plan runs");
        expect(runs[1].plan["source"] == path, "its record names the file");
        expect(runs[1].plan["ops"] == plan_json(planner)["ops"], "its record holds the ops");
        expect(to_json(runs[1])["plan"]["chosen_by"] == "recorded", "chosen_by is recorded");
        expect(runs[1].error_vs_full && runs[1].error_vs_full->max_rel <= 1e-10,
               "exact, like every schedule");
        expect(runs[0].plan.is_null(), "full records no plan");
        std::fprintf(stderr, "%s", failed.c_str());
        std::exit(failed.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace vlrnn::experiments
