#include "vlrnn/registry/methods.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/registry/registry.h"

#include "vlrnn/methods/block.h"

#include "vlrnn/baselines/checkpoint_method.h"
#include "vlrnn/baselines/full_bptt.h"
#include "vlrnn/baselines/tbptt.h"
#include "vlrnn/schedule/bidirectional_vlrnn.h"
#include "vlrnn/schedule/online_method.h"
#include "vlrnn/schedule/planner_method.h"
#include "vlrnn/schedule/schedule_method.h"
#include "vlrnn/schedule/schedulers.h"
#include "vlrnn/schedule/vlrnn_method.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace vlrnn {

namespace {

// One factory per built-in method: reads its options from the spec, checks them, builds it.
std::unique_ptr<GradientMethod> make_full(MethodParams p) {
  p.finish("full", {});
  return std::make_unique<FullBptt>();
}

// The options of VLRNN's blocks ("block_length", a length in steps, or "num_blocks", a
// count), shared by vlrnn and bivlrnn; the caller finishes `p`. The old spellings "block" and
// "blocks" said neither which they were: refused naming the new one.
VlrnnOptions block_options(MethodParams& p, const std::string& method) {
  TORCH_CHECK(!p.has("block"), method,
              ": option 'block' is now 'block_length' (a length in steps): ", method,
              ":block_length=K");
  TORCH_CHECK(!p.has("blocks"), method,
              ": option 'blocks' is now 'num_blocks' (a count of blocks): ", method,
              ":num_blocks=N");
  VlrnnOptions options;
  options.block_length = p.take("block_length", 0);
  options.num_blocks = p.take("num_blocks", 0);
  TORCH_CHECK(!p.has("block_length") || options.block_length > 0, method,
              " block_length: expected a block length K >= 1, got ", options.block_length);
  TORCH_CHECK(!p.has("num_blocks") || options.num_blocks > 0, method,
              " num_blocks: expected a number of blocks N >= 1, got ", options.num_blocks);
  return options;
}

// A memory budget ("budget" in bytes, or "percent" of full BPTT's peak), shared by planner
// and bivlrnn; the caller finishes `p`. `percent` is 0 when budget is given.
struct BudgetParams {
  int64_t bytes = 0;
  double percent = 0.0;
};

BudgetParams budget_options(MethodParams& p, const std::string& method, int64_t default_percent) {
  BudgetParams budget;
  budget.bytes = p.take("budget", 0);
  budget.percent = double(p.take("percent", default_percent));
  TORCH_CHECK(!p.has("budget") || budget.bytes > 0,
              method, " budget: expected a number of bytes >= 1, got ", budget.bytes);
  TORCH_CHECK(!p.has("percent") || budget.percent > 0, method,
              " percent: expected a percentage of full BPTT's peak >= 1, got ", budget.percent);
  TORCH_CHECK(!(p.has("budget") && p.has("percent")),
              method, ": give budget (bytes) or percent, not both");
  if (p.has("budget")) budget.percent = 0.0;
  return budget;
}

std::unique_ptr<GradientMethod> make_vlrnn(MethodParams p) {
  const auto options = block_options(p, "vlrnn");
  p.finish("vlrnn", {"block_length", "num_blocks"});
  return std::make_unique<VlrnnMethod>(options);
}

std::unique_ptr<GradientMethod> make_bivlrnn(MethodParams p) {
  const auto blocks = block_options(p, "bivlrnn");
  const auto budget = budget_options(p, "bivlrnn", 0);
  p.finish("bivlrnn", {"block_length", "num_blocks", "budget", "percent"});
  BidirectionalVlrnnOptions options;
  options.block_length = blocks.block_length;
  options.num_blocks = blocks.num_blocks;
  options.budget_bytes = budget.bytes;
  options.budget_percent = budget.percent;
  return std::make_unique<BidirectionalVlrnn>(options);
}

std::unique_ptr<GradientMethod> make_checkpoint(MethodParams p) {
  CheckpointOptions options;
  options.segments = p.take("segments", 0);
  const int64_t head_inside = p.take("head_inside", 1);
  p.finish("checkpoint", {"segments", "head_inside"});
  TORCH_CHECK(!p.has("segments") || options.segments > 0,
              "checkpoint segments: expected a number of segments >= 1, got ",
              options.segments);
  TORCH_CHECK(head_inside == 0 || head_inside == 1,
              "checkpoint head_inside: expected 1 (head inside the segments) or 0, got ",
              head_inside);
  options.head_inside = head_inside == 1;
  return std::make_unique<CheckpointMethod>(options);
}

std::unique_ptr<GradientMethod> make_tbptt(MethodParams p) {
  const int64_t k = p.take("k", 0);
  TbpttOptions options;
  options.k1 = p.take("k1", k);
  options.k2 = p.take("k2", k);
  p.finish("tbptt", {"k", "k1", "k2"});
  for (const char* key : {"k", "k1", "k2"}) {
    TORCH_CHECK(!p.has(key) || p.values().at(key) > 0, "tbptt ", key,
                ": expected a window of >= 1 steps, got ", p.values().at(key));
  }
  TORCH_CHECK(!(p.has("k") && (p.has("k1") || p.has("k2"))),
              "tbptt: give k, or k1 and k2, not both");
  return std::make_unique<TbpttMethod>(options);
}

std::unique_ptr<GradientMethod> make_revolve(MethodParams p) {
  const int64_t slots = p.take("slots", 4);
  p.finish("revolve", {"slots"});
  TORCH_CHECK(slots >= 1, "revolve slots: expected s >= 1 state slots, got ", slots);
  return std::make_unique<schedule::ScheduleMethod>(
      "revolve", fmt::format("revolve(s={})", slots), [slots](const Workload& w) {
        return schedule::revolve_schedule(w.batch.time_steps(), slots);
      });
}

std::unique_ptr<GradientMethod> make_online(MethodParams p) {
  OnlineOptions options;
  options.slots = p.take("slots", options.slots);
  options.budget_bytes = p.take("bytes", 0);
  p.finish("online", {"slots", "bytes"});
  TORCH_CHECK(options.slots >= 1, "online slots: expected s >= 1 state slots, got ",
              options.slots);
  TORCH_CHECK(!p.has("bytes") || options.budget_bytes > 0,
              "online bytes: expected a number of bytes >= 1, got ", options.budget_bytes);
  TORCH_CHECK(!(p.has("slots") && p.has("bytes")), "online: give slots or bytes, not both");
  return std::make_unique<OnlineMethod>(options);
}

std::unique_ptr<GradientMethod> make_planner(MethodParams p) {
  const auto budget = budget_options(p, "planner", 10);
  p.finish("planner", {"budget", "percent"});
  schedule::PlannerOptions options;
  options.budget_bytes = budget.bytes;
  if (budget.bytes == 0) options.budget_percent = budget.percent;
  return std::make_unique<schedule::PlannerMethod>(options);
}

// The built-in methods, in the order `vlrnn methods` lists them. The schedule-based ones beyond
// uniform blocks (revolve, planner) run their op lists on the one executor; "vlrnn" is the
// uniform schedule.
std::vector<MethodEntry> builtin_methods() {
  return {
      {"full",
       "full BPTT: every activation of all T steps kept (the reference)",
       make_full},
      {"vlrnn",
       "VLRNN blocks of K steps; options block_length=K or num_blocks=N (default K=auto: "
       "ceil(sqrt(T)), on the CPU down to sqrt(T)/4 so that a block's states fit the L2 cache)",
       make_vlrnn},
      {"checkpoint",
       "checkpointing as torch.utils.checkpoint does it; options segments=S (default "
       "ceil(sqrt(T))), head_inside=1|0 (default 1)",
       make_checkpoint},
      {"tbptt",
       "truncated BPTT (approximate): options k (k1 = k2 = k), or k1 and k2 with k1 <= k2 "
       "(default k = ceil(sqrt(T)))",
       make_tbptt},
      {"revolve",
       "binomial checkpointing (Griewank's revolve) with s state slots, h0's included: the "
       "fewest recomputations for s slots; option slots=s (default 4)",
       make_revolve},
      {"planner",
       "the fastest schedule predicted to fit a memory budget (measures a cost model on the "
       "workload on first use; DP over nested recomputation); options budget=BYTES (a cap on "
       "the measured iteration peak) or percent=P: at most P % of full BPTT's measured "
       "iteration peak on the workload (default 10); on a bidirectional model it runs bivlrnn "
       "under the budget; its records keep the plan it ran, which --plan FILE repeats",
       make_planner},
      {"bivlrnn",
       "VLRNN for bidirectional models (bilstm, bigru, bi:<kind>): blocks of K steps, each "
       "direction back-propagated in its own sweep, 1.5 extra forward passes; options "
       "block_length=K or num_blocks=N (default K=auto, as vlrnn's), or budget=BYTES or "
       "percent=P: the largest K whose measured iteration peak fits (measured on the workload "
       "on first use)",
       make_bivlrnn},
      {"online",
       "online checkpointing for sequences of unknown length (Wang, Moin and Iaccarino's "
       "rule): states kept while the forward pass runs, never knowing T, then revolve between "
       "them; a stream's method (vlrnn::OnlineStream), run here on a whole batch; option "
       "slots=s (default 4, h0's included, as revolve's) or bytes=N: as many states of the "
       "workload's size as N bytes hold",
       make_online},
  };
}

Registry<MethodEntry, &MethodEntry::name> registered_methods({"method", "name", "method"},
                                                             builtin_methods);

}  // namespace

const std::vector<MethodEntry>& method_registry() { return registered_methods.entries(); }

void add_method(const std::string& name, const std::string& summary, MethodFactory make) {
  // Stricter than the registry's non-empty check: a method's name heads a spec.
  TORCH_CHECK(!name.empty() && name.find_first_of(":,= ") == std::string::npos,
              "add_method name: expected a non-empty name without ':', ',', '=' or spaces "
              "(it appears in specs like \"name:key=value\"), got \"", name, "\"");
  registered_methods.add({name, summary, std::move(make)});
}

std::vector<std::string> method_names() { return registered_methods.keys(); }

bool handles_bidirectional(const std::string& name) {
  return name == "full" || name == "checkpoint" || name == "bivlrnn" || name == "planner";
}

bool handles_left_to_right(const std::string& name) { return name != "bivlrnn"; }

bool method_takes_model(const std::string& name, const std::string& kind) {
  return is_bidirectional_kind(kind) ? handles_bidirectional(name) : handles_left_to_right(name);
}

void check_method_takes_model(const std::string& method, const std::string& kind) {
  const auto name = method.substr(0, method.find(':'));  // options may be templates ({K})
  if (method_takes_model(name, kind)) return;
  std::vector<std::string> takers;
  for (const auto& known : method_names()) {
    if (method_takes_model(known, kind)) takers.push_back(known);
  }
  TORCH_CHECK(false, "method \"", method, "\" does not take the ",
              is_bidirectional_kind(kind) ? "bidirectional" : "left-to-right", " model \"", kind,
              "\"; the methods that do: ", fmt::format("{}", fmt::join(takers, ", ")));
}

std::unique_ptr<GradientMethod> make_method(const std::string& name, MethodParams params) {
  return registered_methods.at(name).make(std::move(params));
}

std::unique_ptr<GradientMethod> make_method_from_spec(const std::string& spec) {
  auto parsed = parse_method_spec(spec);
  return make_method(parsed.name, std::move(parsed.params));
}

}  // namespace vlrnn
