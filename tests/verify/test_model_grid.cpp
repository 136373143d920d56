// `vlrnn verify --model` at a user's shapes (ModelGrid), its rows of a model file named by
// the file, not its whole path.
#include "test_util.h"

#include "vlrnn/verify/matrix.h"

#include <algorithm>
#include <functional>
#include <set>

namespace vlrnn::verify {
namespace {

void expect_error(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning: " << fragment;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelGrid, TheDefaultIsTheReducedGridAtT28) {
  const auto cases = model_matrix("gru");
  ASSERT_FALSE(cases.empty());
  std::set<std::vector<int64_t>> length_sets;
  for (const auto& c : cases) {
    EXPECT_EQ(c.time_steps, 28);
    EXPECT_EQ(c.batch, c.lengths.empty() ? 3 : 4);
    length_sets.insert(c.lengths);
  }
  EXPECT_EQ(length_sets, (std::set<std::vector<int64_t>>{
                             {}, {17, 28, 1, 4}, {17, 9, 1, 4}}));
}

TEST(ModelGrid, RunsAtTheUsersShapes) {
  ModelGrid grid;
  grid.time_steps = 500;
  grid.batch = 6;
  grid.dtypes = {torch::kFloat32};
  grid.methods = {"full", "vlrnn:block_length=64", "checkpoint"};
  grid.label = "cell.pt";
  const auto cases = model_matrix("gru", grid);
  // 2 methods (full is the reference) x 2 reductions x 1 dtype x 2 h0 modes x 3 length sets.
  ASSERT_EQ(cases.size(), 2u * 2 * 1 * 2 * 3);
  std::set<std::string> methods;
  for (const auto& c : cases) {
    EXPECT_EQ(c.time_steps, 500);
    EXPECT_EQ(c.batch, 6);
    EXPECT_EQ(c.dtype, torch::kFloat32);
    EXPECT_EQ(c.name().rfind("cell.pt/", 0), 0u) << c.name();
    methods.insert(c.method);
    if (!c.lengths.empty()) {
      ASSERT_EQ(c.lengths.size(), 6u);
      EXPECT_EQ(*std::min_element(c.lengths.begin(), c.lengths.end()), 1);
    }
  }
  EXPECT_EQ(methods, (std::set<std::string>{"vlrnn:block_length=64", "checkpoint"}));
  // The variable-length sets scale with T: {300, 500, 1, 72, 300, 500} and one ending
  // before T, {300, 166, 1, 72, 300, 166}.
  std::set<std::vector<int64_t>> length_sets;
  for (const auto& c : cases) length_sets.insert(c.lengths);
  EXPECT_EQ(length_sets, (std::set<std::vector<int64_t>>{
                             {}, {300, 500, 1, 72, 300, 500}, {300, 166, 1, 72, 300, 166}}));
}

TEST(ModelGrid, MinLengthDrawsOneVariableLengthBatch) {
  ModelGrid grid;
  grid.time_steps = 200;
  grid.batch = 8;
  grid.min_length = 0.5;
  const auto cases = model_matrix("rnn", grid);
  ASSERT_FALSE(cases.empty());
  const auto lengths = cases.front().lengths;
  ASSERT_EQ(lengths.size(), 8u);
  EXPECT_EQ(lengths[0], 200);
  for (auto n : lengths) EXPECT_TRUE(n >= 100 && n <= 200) << n;
  for (const auto& c : cases) EXPECT_EQ(c.lengths, lengths);  // the one set
}

TEST(ModelGrid, BadShapesAreRefusedNamingTheField) {
  ModelGrid grid;
  grid.time_steps = 0;
  expect_error([&] { model_matrix("gru", grid); }, "T: expected >= 1");
  grid = {};
  grid.min_length = 1.5;
  expect_error([&] { model_matrix("gru", grid); }, "min_length: expected a fraction");
  grid = {};
  grid.dtypes = {};
  expect_error([&] { model_matrix("gru", grid); }, "dtypes: expected at least one");
}

}  // namespace
}  // namespace vlrnn::verify
