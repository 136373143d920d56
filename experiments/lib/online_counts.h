#pragma once
// Online checkpointing's recomputation beside offline revolve's, which is told T: the
// numbers behind `vlrnn online-counts` and the table in docs/methods.md.
// Per (T, s): the recomputed (no-grad) steps of online_schedule(T, s), revolve's minimum
// binomial_forward_steps(T, s) and the bound NOTE [ Online checkpointing ] states, t·(T − 1)
// with t revolve's repetition number; per s, over every T up to a longest: where the online
// count equals revolve's, whether the bound and the repetition number held, the worst ratio.

#include <cstdint>
#include <string>
#include <vector>

namespace vlrnn::experiments {

// What `vlrnn online-counts` tabulates by default: the table docs/methods.md holds.
inline const std::vector<int64_t> kOnlineCountsSlots = {2, 3, 4, 8, 16, 32};
inline const std::vector<int64_t> kOnlineCountsSteps = {10,   30,    100,   300,   1000,
                                                        3000, 10000, 30000, 100000};
constexpr int64_t kOnlineCountsLongest = 100000;

struct OnlineCountsRow {
  int64_t steps = 0;              // T
  int64_t slots = 0;              // s
  int64_t repetitions = 0;        // t: revolve's repetition number for (T, s)
  int64_t revolve = 0;            // revolve's minimum recomputed steps
  int64_t online = 0;             // online_schedule(T, s)'s recomputed steps
  int64_t bound = 0;              // t·(T − 1)
  int64_t online_repetitions = 0; // the most times the online schedule advances one step
};

// One row per (s, T), s the outer loop.
std::vector<OnlineCountsRow> online_counts(const std::vector<int64_t>& steps,
                                           const std::vector<int64_t>& slots);

struct OnlineCountsSummary {
  int64_t slots = 0;
  int64_t longest = 0;           // every T in [1, longest] was tried
  int64_t beta2 = 0;             // β(s, 2) = (s + 1)(s + 2) / 2
  int64_t equal_up_to = 0;       // the longest T' with online = revolve for every T <= T'
  bool bound_held = true;        // online <= t·(T − 1) for every T
  bool repetitions_optimal = true;  // online repetitions = t for every T
  double worst_ratio = 1.0;      // max online / revolve over T in [10, longest]
  int64_t worst_at = 0;          // its T
};

std::vector<OnlineCountsSummary> online_counts_summary(int64_t longest,
                                                       const std::vector<int64_t>& slots);

// Both as the markdown docs/methods.md holds: the summary, then T down, s across, each cell
// "online / revolve / bound".
std::string online_counts_markdown(const std::vector<int64_t>& steps,
                                   const std::vector<int64_t>& slots, int64_t longest);

}  // namespace vlrnn::experiments
