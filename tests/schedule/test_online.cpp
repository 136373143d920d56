// Online checkpointing (vlrnn/schedule/online.h): the rule's moves, the forward phase decided
// without T, the schedule's validity and budget, its recomputation against offline revolve
// and the bound NOTE [ Online checkpointing ] states, and the "online" method against full
// BPTT.
#include "test_util.h"

#include "vlrnn/schedule/online.h"
#include "vlrnn/schedule/online_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/schedule/simulator.h"

#include <fmt/format.h>

namespace vlrnn::schedule {
namespace {

using testing::expect_error_mentions;

// The most times any step is advanced without grad in `schedule`.
int64_t most_advances_of_a_step(const Schedule& schedule) {
  std::vector<int64_t> advances(size_t(schedule.time_steps), 0);
  for (const Op& op : schedule.ops) {
    if (op.kind != OpKind::kForwardNoGrad) continue;
    for (int64_t t = op.begin; t < op.end; ++t) ++advances[size_t(t)];
  }
  return advances.empty() ? 0 : *std::max_element(advances.begin(), advances.end());
}

OnlineCheckpointer moved_to(int64_t working, int64_t slots) {
  OnlineCheckpointer rule(slots);
  while (rule.position() < working) rule.advance();
  return rule;
}

TEST(OnlineCheckpointer, KeepsEveryStateWhileSlotsLast) {
  OnlineCheckpointer rule(3);
  EXPECT_EQ(rule.kept(), (std::vector<int64_t>{0}));
  for (int64_t w = 0; w < 3; ++w) {
    const OnlineMove move = rule.advance();
    EXPECT_TRUE(move.keeps_previous) << w;
    EXPECT_EQ(move.dropped, -1) << w;
  }
  EXPECT_EQ(rule.position(), 3);
  EXPECT_EQ(rule.kept(), (std::vector<int64_t>{0, 1, 2}));  // h0, 2 kept states, w = 3
}

// s = 3, levels as NOTE [ Online checkpointing ] assigns them (h0 ∞):
//   w = 4: 3 makes way, 4 at level 1      w = 5: 2 dispensable (below 4's level), dropped
//   w = 6: 1 dropped                       w = 7: 6 makes way, 7 at level 1
//   w = 8: 5 dropped                       w = 9, 10: 8, then 9 make way (levels 1, 2)
//   w = 11: 7 dropped (below 10's level 2)
TEST(OnlineCheckpointer, DropsTheLatestDispensableStateElseRaisesTheLevel) {
  const std::vector<std::vector<int64_t>> kept_at = {
      {0}, {0}, {0, 1}, {0, 1, 2}, {0, 1, 2}, {0, 1, 4}, {0, 4, 5},
      {0, 4, 5}, {0, 4, 7}, {0, 4, 7}, {0, 4, 7}, {0, 4, 10}};
  OnlineCheckpointer rule(3);
  for (int64_t w = 0; w < int64_t(kept_at.size()); ++w) {
    EXPECT_EQ(rule.kept(), kept_at[size_t(w)]) << "w = " << w;
    rule.advance();
  }
}

TEST(OnlineCheckpointer, OneSlotHoldsOnlyH0AndTheWorkingState) {
  OnlineCheckpointer rule(1);
  for (int64_t w = 0; w < 20; ++w) {
    const OnlineMove move = rule.advance();
    EXPECT_EQ(move.keeps_previous, w == 0) << w;
  }
  EXPECT_EQ(rule.kept(), (std::vector<int64_t>{0}));
}

TEST(OnlineSchedule, IsValidWithinTheSlotsAndTapesOneStepAtATime) {
  for (int64_t s = 1; s <= 6; ++s) {
    for (int64_t T = 1; T <= 160; ++T) {
      const auto schedule = online_schedule(T, s);
      ScheduleCounts counts;
      ASSERT_NO_THROW(counts = schedule.validate()) << "T=" << T << " s=" << s;
      // revolve's budget: s slots (h0's included) and the state an advance ends at.
      EXPECT_LE(counts.max_stored_states, s) << "T=" << T << " s=" << s;
      EXPECT_EQ(counts.forward_grad_steps, T);
      EXPECT_EQ(counts.max_tape_steps, 1);
      EXPECT_EQ(schedule.name, fmt::format("online(s={})", s));
    }
  }
  EXPECT_EQ(online_schedule(1, 3).ops,
            (std::vector<Op>{Op::forward_grad(0, 1), Op::backward(0, 1)}));
}

// The forward phase depends on the steps seen, never on T: the schedules for T and for any
// T' > T start with the same ops, those the rule emitted up to state T − 1.
TEST(OnlineSchedule, ItsForwardPhaseDoesNotDependOnT) {
  for (int64_t s : {1, 2, 3, 5}) {
    for (int64_t T = 1; T <= 60; ++T) {
      const auto prefix = online_forward_ops(T - 1, s);
      for (int64_t later : {T, T + 1, T + 7, 3 * T + 20}) {
        const auto ops = online_schedule(later, s).ops;
        ASSERT_GE(ops.size(), prefix.size());
        EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), ops.begin()))
            << "s=" << s << ": the schedules for T=" << T << " and T'=" << later
            << " disagree before step " << T;
      }
    }
  }
  // s = 3 up to state 6 (kept {0, 4, 5} from {0, 1, 2}: 3 and 4 advanced in place).
  EXPECT_EQ(online_forward_ops(6, 3),
            (std::vector<Op>{Op::forward_no_grad(0, 1), Op::forward_no_grad(1, 2),
                             Op::forward_no_grad(2, 4), Op::free(2), Op::forward_no_grad(4, 5),
                             Op::free(1)}));
}

// The simulator prices it as any schedule: revolve's peak at the same slots, and at
// least revolve's time (revolve recomputes the least).
TEST(OnlineSchedule, TheSimulatorPricesItBesideRevolve) {
  for (int64_t T : {40, 500}) {
    const auto model = CostModel::uniform(T, 1.0, 1.5, 2.5, 1000, 200, 0);
    const auto online = simulate(online_schedule(T, 4), model);
    const auto revolve = simulate(revolve_schedule(T, 4), model);
    EXPECT_EQ(online.peak_bytes, revolve.peak_bytes) << T;
    EXPECT_GE(online.seconds, revolve.seconds) << T;
    EXPECT_EQ(online.counts.forward_no_grad_steps,
              online_cost(moved_to(T - 1, 4)).forward_no_grad_steps);
    std::cout << "[ simulated] T=" << T << " s=4: online " << online.peak_bytes << " B, "
              << online.seconds << " s; revolve " << revolve.peak_bytes << " B, "
              << revolve.seconds << " s\n";
  }
}

TEST(OnlineCost, IsWhatTheScheduleRuns) {
  for (int64_t s = 1; s <= 6; ++s) {
    for (int64_t T = 1; T <= 150; ++T) {
      const auto schedule = online_schedule(T, s);
      const auto cost = online_cost(moved_to(T - 1, s));
      EXPECT_EQ(cost.forward_no_grad_steps, schedule.validate().forward_no_grad_steps)
          << "T=" << T << " s=" << s;
      EXPECT_EQ(cost.repetitions, most_advances_of_a_step(schedule)) << "T=" << T << " s=" << s;
    }
  }
}

// What the comparison stands on: revolve's op list recomputes its minimum, and advances no step
// more than its repetition number t times.
TEST(OnlineCost, RevolveItIsMeasuredAgainstReachesItsMinimum) {
  for (int64_t s = 1; s <= 6; ++s) {
    for (int64_t T = 1; T <= 150; ++T) {
      const auto revolve = revolve_schedule(T, s);
      EXPECT_EQ(revolve.validate().forward_no_grad_steps, binomial_forward_steps(T, s));
      EXPECT_EQ(most_advances_of_a_step(revolve), T == 1 ? 0 : binomial_repetitions(T, s))
          << "T=" << T << " s=" << s;
    }
  }
}

// NOTE [ Online checkpointing ]: for every T up to 100,000 the rule keeps the optimal
// repetition number t of offline revolve (which knows T), so at most t·(T − 1) recomputed
// steps; and up to β(s, 2) it recomputes exactly revolve's minimum. docs/methods.md
// tabulates the same numbers (`vlrnn online-counts`).
TEST(OnlineCost, KeepsThePublishedBoundAndRevolvesMinimumUpToBeta2) {
  constexpr int64_t kLongest = 100000;
  for (int64_t s : {1, 2, 3, 4, 6, 8, 16, 32}) {
    OnlineCheckpointer rule(s);
    int64_t worse_than_bound = 0, unequal_up_to_beta2 = 0, other_repetitions = 0;
    for (int64_t T = 1; T <= kLongest; ++T) {
      if (T > 1) rule.advance();
      const auto cost = online_cost(rule);
      const int64_t t = binomial_repetitions(T, s), offline = binomial_forward_steps(T, s);
      if (cost.forward_no_grad_steps > t * (T - 1)) ++worse_than_bound;
      if (cost.repetitions != t) ++other_repetitions;
      if (T <= binomial_beta(s, 2) && cost.forward_no_grad_steps != offline) ++unequal_up_to_beta2;
      ASSERT_GE(cost.forward_no_grad_steps, offline) << "T=" << T << " s=" << s;
    }
    EXPECT_EQ(worse_than_bound, 0) << "s=" << s;
    EXPECT_EQ(other_repetitions, 0) << "s=" << s;
    EXPECT_EQ(unequal_up_to_beta2, 0) << "s=" << s;
  }
}

TEST(OnlineSchedule, BadArgumentsAreNamed) {
  expect_error_mentions([] { OnlineCheckpointer rule(0); }, {"online slots", "s >= 1", "got 0"});
  expect_error_mentions([] { online_schedule(0, 3); }, {"online schedule", "T >= 1", "got 0"});
  expect_error_mentions([] { online_schedule(5, -1); }, {"online slots", "got -1"});
  expect_error_mentions([] { online_slots_for_bytes(50, 64, "bytes"); },
                        {"bytes", "one state of 64 bytes", "got 50"});
  EXPECT_EQ(online_slots_for_bytes(1000, 64, "bytes"), 15);
}

TEST(OnlineMethod, SpecsAndTheirErrors) {
  EXPECT_EQ(make_method_from_spec("online")->describe(), "online(s=4)");
  EXPECT_EQ(make_method_from_spec("online:slots=7")->describe(), "online(s=7)");
  EXPECT_EQ(make_method_from_spec("online:bytes=4096")->describe(), "online(bytes=4096)");
  expect_error_mentions([] { make_method_from_spec("online:slots=0"); },
                        {"online slots", "s >= 1", "got 0"});
  expect_error_mentions([] { make_method_from_spec("online:bytes=0"); },
                        {"online bytes", ">= 1", "got 0"});
  expect_error_mentions([] { make_method_from_spec("online:slots=2,bytes=64"); },
                        {"online", "slots or bytes, not both"});
  expect_error_mentions([] { make_method_from_spec("online:slot=2"); },
                        {"online", "slot", "known options: slots, bytes"});
}

// Exact against full BPTT in float64 with dropout, variable lengths, h0 and x with grad,
// past β(s, 2) so that the rule drops states and raises levels; the counters are the
// schedule's.
TEST(OnlineMethod, EqualsFullBpttWithDropoutAndVariableLengths) {
  for (const auto& [spec, slots] : std::vector<std::pair<std::string, int64_t>>{
           {"online:slots=1", 1}, {"online:slots=2", 2}, {"online:slots=3", 3}}) {
    testing::SmallProblem p("lstm", 23, 4, torch::kFloat64, 2);
    p.model = make_model({"lstm", 3, 4, 2, 0.3});
    p.model->to(torch::kFloat64);
    p.batch.lengths = torch::tensor({23, 9, 1, 17}, torch::kLong);
    p.batch.inputs.requires_grad_(true);
    const State h0 = testing::random_state(*p.model, 4, torch::kFloat64, /*requires_grad=*/true);
    auto run = [&](const std::string& method) {
      std::vector<torch::Tensor> leaves(h0.begin(), h0.end());
      leaves.push_back(p.batch.inputs);
      testing::clear_grads(*p.model, *p.head, leaves);
      torch::manual_seed(3);
      const auto result = make_method_from_spec(method)->compute(p.workload(h0));
      testing::Named out = testing::parameters_by_name(*p.model);
      for (auto& [name, value] : out) value = value.grad().clone();
      out["x"] = p.batch.inputs.grad().clone();
      for (size_t i = 0; i < h0.size(); ++i) out["h0 " + std::to_string(i)] = h0[i].grad().clone();
      out["loss"] = result.loss;
      out["step losses"] = result.step_losses;
      return std::make_pair(out, result.counters);
    };
    const auto [reference, unused] = run("full");
    const auto [got, counters] = run(spec);
    testing::expect_close(got, reference, 1e-10, spec);
    const auto counts = online_schedule(23, slots).validate();
    EXPECT_EQ(counters.forward_no_grad, counts.forward_no_grad_steps) << spec;
    EXPECT_EQ(counters.forward_with_grad, 23) << spec;
  }
}

}  // namespace
}  // namespace vlrnn::schedule
