// The public verifier call for a user's own model: the same rows `vlrnn verify` prints.
#include "test_util.h"

#include "vlrnn/verify/report.h"
#include "vlrnn/verify/verify_model.h"

#include <sstream>

namespace vlrnn::verify {
namespace {

TEST(VerifyModel, ReturnsOneRowPerMethodWithTheUsersShapes) {
  testing::SmallProblem p("gru", /*steps=*/15, /*batch=*/3);
  p.batch.lengths = torch::tensor({15, 4, 9}, torch::kLong);
  p.batch.inputs.requires_grad_(true);
  VerifyModelOptions options;
  options.label = "my_gru";
  const auto rows = verify_model(*p.model, *p.head, p.batch,
                                 {"vlrnn:block_length=4", "checkpoint:segments=3", "tbptt:k=2",
                                  "vlrnn:block_length=0"},
                                 options);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_TRUE(rows[0].passed) << rows[0].error << " " << rows[0].diff.worst;
  EXPECT_TRUE(rows[1].passed) << rows[1].error << " " << rows[1].diff.worst;
  EXPECT_FALSE(rows[2].exact);
  EXPECT_GT(rows[2].diff.grad_rel_error, 0.0);
  EXPECT_FALSE(rows[3].passed);  // a bad spec is an error row, not an exception
  EXPECT_NE(rows[3].error.find("block"), std::string::npos);
  EXPECT_EQ(rows[0].spec.time_steps, 15);
  EXPECT_EQ(rows[0].spec.lengths, (std::vector<int64_t>{15, 4, 9}));
  std::ostringstream table;
  print_table(table, rows);
  EXPECT_NE(table.str().find("my_gru"), std::string::npos);
  EXPECT_NE(table.str().find("vlrnn:block_length=4"), std::string::npos);
}

}  // namespace
}  // namespace vlrnn::verify
