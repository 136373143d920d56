// The bidirectional block method (vlrnn/schedule/bidirectional_vlrnn.h) and checkpointing of
// a bidirectional model, against full BPTT through the verifier's case runner: loss,
// per-step losses, final state and the gradients of every parameter, h0 and x, float64 at
// 1e-10, fixed lengths, lengths ending inside blocks and a padded tail, dropout drawn per
// step inside each direction and between stacked layers.
#include "test_util.h"

#include "vlrnn/schedule/bidirectional_vlrnn.h"
#include "vlrnn/verify/case.h"

namespace vlrnn {
namespace {

struct Shape {
  std::string kind;
  int64_t layers;
  double dropout;
  std::string head;
};

std::vector<verify::VerifyCase> cases_for(const std::string& method) {
  const std::vector<Shape> shapes = {{"bilstm", 1, 0.0, "ce"},
                                     {"bigru", 1, 0.0, "mse"},
                                     {"bi:lstm", 2, 0.3, "ce"},    // dropout inside each direction
                                     {"bi:gru_v3", 1, 0.0, "mse"},  // hand-written cells
                                     {"bilstm", 3, 0.25, "mse"}};  // stacked, dropout between
  const std::vector<std::vector<int64_t>> length_sets = {
      {}, {17, 28, 1, 4}, {17, 9, 1, 4}};  // fixed; reaching T; a padded tail
  std::vector<verify::VerifyCase> cases;
  for (const auto& shape : shapes) {
    for (const auto& lengths : length_sets) {
      for (const bool h0_with_grad : {true, false}) {
        verify::VerifyCase c;
        c.model = shape.kind;
        c.num_layers = shape.layers;
        c.dropout = shape.dropout;
        c.head = shape.head;
        c.method = method;
        c.reduction = h0_with_grad ? "mean" : "sum";
        c.h0_with_grad = h0_with_grad;
        c.inputs_with_grad = h0_with_grad || lengths.empty();
        c.lengths = lengths;
        c.batch = 4;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

class ExactOnBidirectional : public ::testing::TestWithParam<std::string> {};

TEST_P(ExactOnBidirectional, EqualsFullBptt) {
  double worst = 0.0;
  for (const auto& c : cases_for(GetParam())) {
    SCOPED_TRACE(c.name() + " " + c.method);
    const auto outcome = verify::run_case(c);
    ASSERT_TRUE(outcome.error.empty()) << outcome.error;
    ASSERT_TRUE(outcome.exact);
    EXPECT_LE(outcome.diff.max_rel, 1e-10) << "worst: " << outcome.diff.worst;
    worst = std::max(worst, outcome.diff.max_rel);
  }
  std::cout << "[ maxdiff  ] " << GetParam() << ": " << worst << "\n";
}

// K = 1, 5 (does not divide T = 28), 7, T, beyond T; checkpointing with 1, 5 and T segments.
INSTANTIATE_TEST_SUITE_P(Methods, ExactOnBidirectional,
                         ::testing::Values("bivlrnn:block=1", "bivlrnn:block=5", "bivlrnn:block=7",
                                           "bivlrnn:block=28", "bivlrnn:block=40", "bivlrnn",
                                           "bivlrnn:blocks=3", "checkpoint:segments=1",
                                           "checkpoint:segments=5", "checkpoint:segments=28"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// The generators end where one forward pass leaves them, as after full BPTT.
TEST(BidirectionalVlrnn, LeavesTheGeneratorsWhereFullBpttDoes) {
  torch::manual_seed(4);
  auto model = make_model({"bilstm", 3, 4, 2, 0.5});
  auto head = make_head("ce", model->output_size(), 3);
  SequenceBatch batch{torch::randn({13, 2, 3}), torch::randint(0, 3, {13, 2}), {}};
  std::vector<torch::Tensor> next;
  for (const char* spec : {"full", "bivlrnn:block=4", "checkpoint:segments=3"}) {
    torch::manual_seed(11);
    make_method_from_spec(spec)->compute(Workload{*model, *head, batch});
    next.push_back(torch::rand({3}));
  }
  EXPECT_TRUE(torch::equal(next[0], next[1]));
  EXPECT_TRUE(torch::equal(next[0], next[2]));
}

// Counters in steps of the whole model: 1.5 extra forward passes for one layer.
TEST(BidirectionalVlrnn, CountsOneAndAHalfExtraForwardPasses) {
  auto model = make_model({"bigru", 3, 4});
  auto head = make_head("mse", model->output_size(), 2);
  SequenceBatch batch{torch::randn({20, 2, 3}), torch::randn({20, 2, 2}), {}};
  const auto result = make_method_from_spec("bivlrnn:block=6")->compute(Workload{*model, *head, batch});
  EXPECT_EQ(result.counters.forward_with_grad, 20);
  EXPECT_EQ(result.counters.backward, 20);
  EXPECT_EQ(result.counters.forward_no_grad, 30);
  EXPECT_EQ(BidirectionalVlrnn(BidirectionalVlrnnOptions().with_num_blocks(3)).block_length_for(20), 7);
}

TEST(BidirectionalVlrnn, BadOptionsAreRejected) {
  testing::expect_error_mentions([] { make_method_from_spec("bivlrnn:block=0"); },
                                 {"bivlrnn block", ">= 1", "0"});
  testing::expect_error_mentions([] { make_method_from_spec("bivlrnn:block=3,blocks=2"); },
                                 {"vlrnn", "not both"});
  testing::expect_error_mentions([] { make_method_from_spec("bivlrnn:k=3"); },
                                 {"bivlrnn", "unknown option", "k", "block, blocks"});
}

}  // namespace
}  // namespace vlrnn
