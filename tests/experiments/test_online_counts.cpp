// `vlrnn online-counts` (experiments/lib/online_counts.h): its rows are the online
// schedule's and revolve's counts, its summary says where they are equal, and docs/methods.md
// holds its default output as it stands.
#include "test_util.h"

#include "lib/online_counts.h"
#include "vlrnn/schedule/online.h"
#include "vlrnn/schedule/schedulers.h"

#include <fstream>
#include <sstream>

namespace vlrnn::experiments {
namespace {

using testing::expect_error_mentions;

TEST(OnlineCounts, RowsAreTheSchedulesCounts) {
  for (const auto& row : online_counts({1, 10, 57}, {1, 3})) {
    EXPECT_EQ(row.online, schedule::online_schedule(row.steps, row.slots).validate().forward_no_grad_steps);
    EXPECT_EQ(row.revolve, schedule::revolve_schedule(row.steps, row.slots).validate().forward_no_grad_steps);
    EXPECT_EQ(row.bound, row.repetitions * (row.steps - 1));
  }
  expect_error_mentions([] { online_counts({0}, {2}); }, {"online counts steps", "T >= 1", "got 0"});
  expect_error_mentions([] { online_counts({5}, {0}); }, {"online counts slots", "s >= 1", "got 0"});
}

TEST(OnlineCounts, TheSummarySaysWhereOnlineEqualsRevolve) {
  const auto summary = online_counts_summary(200, {3});
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].beta2, 10);
  EXPECT_GE(summary[0].equal_up_to, summary[0].beta2);
  EXPECT_TRUE(summary[0].bound_held);
  EXPECT_TRUE(summary[0].repetitions_optimal);
  EXPECT_GT(summary[0].worst_ratio, 1.0);
}

TEST(OnlineCounts, TheDocsHoldTheDefaultTable) {
  std::ifstream file(std::string(VLRNN_SOURCE_DIR) + "/docs/methods.md");
  std::stringstream page;
  page << file.rdbuf();
  const auto table =
      online_counts_markdown(kOnlineCountsSteps, kOnlineCountsSlots, kOnlineCountsLongest);
  EXPECT_NE(page.str().find(table), std::string::npos)
      << "docs/methods.md lacks `build/vlrnn online-counts`'s output:\n" << table;
}

}  // namespace
}  // namespace vlrnn::experiments
