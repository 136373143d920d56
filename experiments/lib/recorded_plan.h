#pragma once
// Plans you can keep: the planner's plan as the records hold it, and method "plan", which
// runs a recorded plan again.
//
// NOTE [ Recorded plans ]
// The planner chooses from a cost model measured on this machine and may plan again after
// checking its choice (NOTE [ A budget is a promise ] in planner_method.cpp), so two runs on
// one workload can choose different schedules: both exact, equal only to rounding. So every
// record of a planner run keeps its plan under "plan": the ops the executor ran, how they
// were chosen, what they were checked against and the cost model they were chosen from
// (the fields: docs/architecture.md, "The results schema"). `--plan FILE` reads the ops back
// as method "plan", which runs exactly them on the one executor, with no measuring and no
// planning: on the same build and machine, the same gradients bit for bit. FILE is any JSON
// that holds plans, as long as they are all one op list. A plan of T steps runs only on
// workloads of T steps.

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
