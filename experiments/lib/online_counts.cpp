#include "lib/online_counts.h"

#include "vlrnn/schedule/online.h"
#include "vlrnn/schedule/schedulers.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace vlrnn::experiments {
namespace {

// The row of T = checkpointer.position() + 1: the stream ended there.
OnlineCountsRow row_at(const schedule::OnlineCheckpointer& checkpointer) {
  OnlineCountsRow row;
  row.steps = checkpointer.position() + 1;
  row.slots = checkpointer.slots();
  row.repetitions = schedule::binomial_repetitions(row.steps, row.slots);
  row.revolve = schedule::binomial_forward_steps(row.steps, row.slots);
  const auto cost = schedule::online_cost(checkpointer);
  row.online = cost.forward_no_grad_steps;
  row.online_repetitions = cost.repetitions;
  row.bound = row.repetitions * (row.steps - 1);
  return row;
}

void check_lists(const std::vector<int64_t>& steps, const std::vector<int64_t>& slots) {
  for (int64_t T : steps) TORCH_CHECK(T >= 1, "online counts steps: expected T >= 1, got ", T);
  for (int64_t s : slots) TORCH_CHECK(s >= 1, "online counts slots: expected s >= 1, got ", s);
}

}  // namespace

std::vector<OnlineCountsRow> online_counts(const std::vector<int64_t>& steps,
                                           const std::vector<int64_t>& slots) {
  check_lists(steps, slots);
  std::vector<int64_t> ascending = steps;
  std::sort(ascending.begin(), ascending.end());
  std::vector<OnlineCountsRow> rows;
  for (int64_t s : slots) {
    // One pass of the rule per s: the forward phase does not depend on T.
    schedule::OnlineCheckpointer rule(s);
    for (int64_t T : ascending) {
      while (rule.position() + 1 < T) rule.advance();
      rows.push_back(row_at(rule));
    }
  }
  return rows;
}

std::vector<OnlineCountsSummary> online_counts_summary(int64_t longest,
                                                       const std::vector<int64_t>& slots) {
  check_lists({longest}, slots);
  std::vector<OnlineCountsSummary> out;
  for (int64_t s : slots) {
    OnlineCountsSummary summary;
    summary.slots = s;
    summary.longest = longest;
    summary.beta2 = schedule::binomial_beta(s, 2);
    bool equal_so_far = true;
    schedule::OnlineCheckpointer rule(s);
    for (int64_t T = 1; T <= longest; ++T) {
      if (T > 1) rule.advance();
      const auto row = row_at(rule);
      equal_so_far = equal_so_far && row.online == row.revolve;
      if (equal_so_far) summary.equal_up_to = T;
      summary.bound_held = summary.bound_held && row.online <= row.bound;
      summary.repetitions_optimal =
          summary.repetitions_optimal && row.online_repetitions == row.repetitions;
      if (T >= 10 && row.revolve > 0) {
        const double ratio = double(row.online) / double(row.revolve);
        if (ratio > summary.worst_ratio) summary.worst_ratio = ratio, summary.worst_at = T;
      }
    }
    out.push_back(summary);
  }
  return out;
}

std::string online_counts_markdown(const std::vector<int64_t>& steps,
                                   const std::vector<int64_t>& slots, int64_t longest) {
  std::string md = fmt::format(
      "Over every T from 1 to {}: online = revolve up to T, against β(s, 2); whether the "
      "bound t·(T − 1) and the repetition number t held at every T; the worst online / "
      "revolve for T >= 10.\n\n"
      "| s | online = revolve up to T | β(s, 2) | bound held | repetitions = t "
      "| worst online / revolve |\n"
      "|---|---|---|---|---|---|\n",
      longest);
  for (const auto& s : online_counts_summary(longest, slots)) {
    md += fmt::format("| {} | {} | {} | {} | {} | {:.3f} (T = {}) |\n", s.slots, s.equal_up_to,
                      s.beta2, s.bound_held ? "yes" : "NO", s.repetitions_optimal ? "yes" : "NO",
                      s.worst_ratio, s.worst_at);
  }
  md += "\nRecomputed steps, online / revolve / bound:\n\n| T |";
  for (int64_t s : slots) md += fmt::format(" s = {} |", s);
  md += "\n|---|";
  for (size_t i = 0; i < slots.size(); ++i) md += "---|";
  md += "\n";
  std::map<std::pair<int64_t, int64_t>, OnlineCountsRow> cells;  // (T, s) -> row
  for (const auto& row : online_counts(steps, slots)) cells[{row.steps, row.slots}] = row;
  std::vector<int64_t> ascending = steps;
  std::sort(ascending.begin(), ascending.end());
  for (int64_t T : ascending) {
    md += fmt::format("| {} |", T);
    for (int64_t s : slots) {
      const auto& row = cells.at({T, s});
      md += fmt::format(" {} / {} / {} |", row.online, row.revolve, row.bound);
    }
    md += "\n";
  }
  return md;
}

}  // namespace vlrnn::experiments
