#include "lib/recorded_plan.h"

#include "lib/json_fields.h"

#include "vlrnn/registry/methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <type_traits>
#include <vector>

namespace vlrnn::experiments {
namespace {

using nlohmann::json;

// [[value, count], ...]: a per-step vector is mostly runs of one value (every step of a
// fixed-length batch costs the same), so a record stays small at any T.
template <typename Value>
json run_length_json(const std::vector<Value>& values) {
  json runs = json::array();
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j < values.size() && values[j] == values[i]) ++j;
    runs.push_back({values[i], j - i});
    i = j;
  }
  return runs;
}

// The ops of `schedule` as Op::describe() writes them, which plan_from_json reads back.
json ops_json(const schedule::Schedule& schedule) {
  json ops = json::array();
  for (const auto& op : schedule.ops) ops.push_back(op.describe());
  return ops;
}

// Every object in `j` that looks like a plan (holds "ops" and "time_steps"), depth first.
void collect_plans(const json& j, std::vector<const json*>& found) {
  if (j.is_object() && j.contains("ops") && j.contains("time_steps")) {
    found.push_back(&j);
    return;
  }
  if (j.is_object() || j.is_array()) {
    for (const auto& child : j) collect_plans(child, found);
  }
}

// The file as JSON values: one document, or one per line (a results.jsonl).
std::vector<json> read_documents(const std::string& path) {
  std::ifstream in(path);
  TORCH_CHECK(in, "--plan ", path, ": cannot read the file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (json::accept(text, /*ignore_comments=*/true)) {
    return {json_fields::parse_json_text(text, path)};
  }
  std::vector<json> lines;
  std::istringstream stream(text);
  int64_t number = 0;
  for (std::string line; std::getline(stream, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(json_fields::parse_json_text(line, fmt::format("{} line {}", path, number)));
  }
  return lines;
}

}  // namespace

json prediction_json(const schedule::Prediction& p) {
  return {{"peak_bytes", p.peak_bytes},
          {"time_s", p.seconds},
          {"forward_no_grad_steps", p.counts.forward_no_grad_steps},
          {"max_stored_states", p.counts.max_stored_states},
          {"max_tape_steps", p.counts.max_tape_steps},
          {"kept_tapes", p.counts.kept_tapes}};
}

json cost_model_json(const schedule::CostModel& model) {
  json j = json::object();
  schedule::for_each_field(model, [&](const char* name, const auto& field) {
    using Field = std::decay_t<decltype(field)>;
    // "step.tape_bytes" -> {"step": {"tape_bytes": ...}}: the model's groups, nested.
    std::string pointer = "/" + std::string(name);
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    auto& slot = j[json::json_pointer(pointer)];
    if constexpr (std::is_same_v<Field, std::vector<double>> ||
                  std::is_same_v<Field, std::vector<int64_t>>) {
      slot = run_length_json(field);
    } else {
      slot = field;
    }
  });
  return j;
}

json plan_json(const schedule::PlannerMethod& planner) {
  const auto& plan = planner.current_plan();
  if (plan.schedule.ops.empty()) return json();
  return {{"time_steps", plan.schedule.time_steps},
          {"schedule", plan.schedule.name},
          {"chosen_by", plan.chosen_by},
          {"parameter", plan.parameter},
          {"ops", ops_json(plan.schedule)},
          {"predicted", prediction_json(plan.prediction)},
          {"budget_bytes", planner.checked_budget_bytes()},
          {"checked_peak_bytes", planner.checked_peak_bytes()},
          {"margin", planner.margin()},
          {"cost_model", cost_model_json(planner.cost_model())}};
}

schedule::Schedule plan_from_json(const json& plan, const std::string& source) {
  namespace f = json_fields;
  TORCH_CHECK(plan.is_object(), source, ": expected a plan object, got ", f::type_of(plan));
  schedule::Schedule s;
  s.time_steps = f::read_int(plan.at("time_steps"), source + " time_steps", 1);
  s.name = plan.contains("schedule") ? f::read_string(plan["schedule"], source + " schedule")
                                     : std::string("recorded");
  const auto ops = f::read_string_list(plan.at("ops"), source + " ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    try {
      s.ops.push_back(schedule::Op::parse(ops[i]));
    } catch (const c10::Error& e) {
      f::fail(fmt::format("{} ops[{}]", source, i), e.what_without_backtrace());
    }
  }
  s.validate();  // throws naming the op that breaks NOTE [ Schedule invariants ]
  return s;
}

schedule::Schedule read_plan_file(const std::string& path) {
  const auto documents = read_documents(path);
  std::vector<const json*> found;
  for (const auto& d : documents) collect_plans(d, found);
  TORCH_CHECK(!found.empty(), "--plan ", path,
              ": expected a recorded plan (an object with \"time_steps\" and \"ops\", as a "
              "planner run's record holds it under \"plan\"), found none");
  for (const auto* other : found) {
    TORCH_CHECK(other->at("ops") == found[0]->at("ops") &&
                    other->at("time_steps") == found[0]->at("time_steps"),
                "--plan ", path, ": expected one plan, found ", found.size(),
                " that differ (several planner runs or lengths); keep the record to repeat in "
                "a file of its own");
  }
  return plan_from_json(*found[0], "--plan " + path);
}

RecordedPlanMethod::RecordedPlanMethod(schedule::Schedule plan, std::string source)
    : schedule::ScheduleMethod(
          "plan", fmt::format("plan({})", source),  // its schedule's name is in its record
          [plan](const Workload& w) {
            TORCH_CHECK(w.batch.time_steps() == plan.time_steps, "plan ", plan.name,
                        ": recorded for T = ", plan.time_steps, " steps, the workload has T = ",
                        w.batch.time_steps());
            return plan;
          }),
      plan_(std::move(plan)),
      source_(std::move(source)) {}

json plan_json(const RecordedPlanMethod& method) {
  return {{"time_steps", method.plan().time_steps},
          {"schedule", method.plan().name},
          {"chosen_by", "recorded"},
          {"source", method.source()},
          {"ops", ops_json(method.plan())}};
}

json ran_plan_json(const GradientMethod& method) {
  if (const auto* planner = dynamic_cast<const schedule::PlannerMethod*>(&method)) {
    return plan_json(*planner);
  }
  if (const auto* recorded = dynamic_cast<const RecordedPlanMethod*>(&method)) {
    return plan_json(*recorded);
  }
  return nullptr;
}

schedule::Schedule add_plan_method(const std::string& path) {
  const auto plan = read_plan_file(path);
  add_method("plan",
             fmt::format("the recorded plan read from {} ({}, T = {}): its ops run exactly, "
                         "without measuring or planning",
                         path, plan.name, plan.time_steps),
             [plan, path](MethodParams p) -> std::unique_ptr<GradientMethod> {
               p.finish("plan", {});
               return std::make_unique<RecordedPlanMethod>(plan, path);
             });
  return plan;
}

}  // namespace vlrnn::experiments
