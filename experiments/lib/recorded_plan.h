#pragma once
// Plans you can keep: the planner's plan as the records hold it, and method "plan", which
// runs a recorded plan again.
//
// NOTE [ Recorded plans ]
// The planner chooses from a cost model measured on this machine (or read from the disk
// cache), then checks the choice's measured peak and may plan again (NOTE [ A budget is a
// promise ] in planner_method.cpp). Two runs on one workload can therefore choose different
// schedules; both are exact, but they agree with each other only to rounding. So every
// record of a planner run (compare --json, sweep and budget records, train's meta.json)
// keeps its plan under "plan":
//   time_steps, schedule (its name), chosen_by, parameter: what was chosen and how;
//   ops: the op list the executor ran, as Op::describe() writes each op;
//   predicted, budget_bytes, checked_peak_bytes, margin: what it was checked against;
//   cost_model: every field of the model it was chosen from (for_each_field), nested by
//     group ({"step": {"tape_bytes": ...}, "call": ...}), each per-step vector run-length
//     encoded as [[value, count], ...].
// `--plan FILE` reads the ops back and registers method "plan", which runs exactly them on
// the one executor: no measurement, no planning, the same ops in the same order, so on the
// same build and machine the same gradients bit for bit. FILE may be a plan object or any
// JSON that holds one (a compare --json output, a budget record, a train meta.json, a
// sweep's results.jsonl with one record per line), as long as all the plans it holds are
// one op list.
//
// Shapes: a plan of T steps runs only on workloads of T steps.

#include "vlrnn/schedule/cost_model.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedule.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/simulator.h"

#include <nlohmann/json.hpp>

#include <string>

namespace vlrnn::experiments {

// A prediction as the records hold it.
nlohmann::json prediction_json(const schedule::Prediction& prediction);

// Every field of `model`, per-step vectors run-length encoded ([[value, count], ...]).
nlohmann::json cost_model_json(const schedule::CostModel& model);

// The prepared planner's plan (NOTE [ Recorded plans ]); null when it holds none (not
// prepared yet, or a bidirectional model, where it runs bivlrnn and describe() names K).
nlohmann::json plan_json(const schedule::PlannerMethod& planner);

// The schedule of a plan object (its "time_steps" and "ops"), validated; `source` names
// where it came from in errors.
schedule::Schedule plan_from_json(const nlohmann::json& plan, const std::string& source);

// The one op list held in the file at `path` (NOTE [ Recorded plans ]); throws naming the
// file when it holds none, or several different ones.
schedule::Schedule read_plan_file(const std::string& path);

// Method "plan": runs `plan` exactly, on workloads of its T steps only.
class RecordedPlanMethod : public schedule::ScheduleMethod {
 public:
  RecordedPlanMethod(schedule::Schedule plan, std::string source);
  const schedule::Schedule& plan() const { return plan_; }
  const std::string& source() const { return source_; }

 private:
  schedule::Schedule plan_;
  std::string source_;
};

// The record of a "plan" run: its ops and the file they came from.
nlohmann::json plan_json(const RecordedPlanMethod& method);

// The plan `method` ran, for its record: plan_json of a planner or of a recorded plan, null
// for every other method.
nlohmann::json ran_plan_json(const GradientMethod& method);

// Registers method "plan" running the plan read from `path` (read_plan_file), so that
// specs, configs and --methods can name it; returns the plan. Throws when a method "plan"
// is registered already (one recorded plan per process).
schedule::Schedule add_plan_method(const std::string& path);

}  // namespace vlrnn::experiments
