#include "test_util.h"

#include "vlrnn/measure/flops.h"

namespace vlrnn::measure {
namespace {

// GEMM FLOPs of one step from the module's own weight shapes: every 2-D parameter W [out, in]
// is one GEMM per step, x [B, in] · Wᵀ -> [B, out], costing 2·in·out per sequence.
double gemm_flops_from_weights(torch::nn::Module& module) {
  double flops = 0.0;
  for (const auto& p : module.parameters()) {
    if (p.dim() == 2) flops += 2.0 * double(p.size(0)) * double(p.size(1));
  }
  return flops;
}

struct Case {
  std::string kind;
  int64_t layers;
};

TEST(FlopModel, GemmFlopsMatchTheModulesWeightShapes) {
  for (const auto& c : {Case{"rnn", 1}, Case{"rnn", 2}, Case{"gru", 1}, Case{"gru", 3},
                        Case{"lstm", 1}, Case{"lstm", 3}, Case{"gru_lstm", 1},
                        Case{"lstm_block", 1}, Case{"lstm_block", 3}, Case{"gru_v3", 2}}) {
    const ModelConfig config{c.kind, 5, 7, c.layers};
    auto model = make_model(config);
    auto head = make_head("ce", model->output_size(), 11);
    const auto flops = flops_per_step(config, "ce", 11);
    EXPECT_DOUBLE_EQ(flops.model_gemm, gemm_flops_from_weights(*model)) << c.kind << "x" << c.layers;
    EXPECT_DOUBLE_EQ(flops.head_gemm, gemm_flops_from_weights(*head)) << c.kind;
  }
}

TEST(FlopModel, TheWeightShapeFallbackAgreesWithTheTableOnItsGemms) {
  const ModelConfig config{"gru_lstm", 6, 10, 1};
  auto model = make_model(config);
  auto head = make_head("mse", model->output_size(), 3);
  const auto table = flops_per_step(config, "mse", 3);
  const auto fallback = flops_from_weights(*model, *head, "mse", 3);
  EXPECT_DOUBLE_EQ(fallback.model_gemm, table.model_gemm);
  EXPECT_DOUBLE_EQ(fallback.head_forward(), table.head_forward());
  EXPECT_DOUBLE_EQ(fallback.model_elementwise, 0.0);
  EXPECT_TRUE(has_flop_model("gru_lstm"));
  EXPECT_TRUE(has_flop_model("lstm_block"));
  EXPECT_TRUE(has_flop_model("gru_v4"));
  EXPECT_FALSE(has_flop_model("gru_v9"));
  EXPECT_FALSE(has_flop_model("my_cell"));
}

TEST(FlopModel, HandComputedShapes) {
  // LSTM F = 3, H = 4: gates [4H] = W_ih [16, 3] · x + W_hh [16, 4] · h -> 2·16·(3 + 4).
  EXPECT_DOUBLE_EQ(flops_per_step({"lstm", 3, 4, 1}, "ce", 2).model_gemm, 224.0);
  // GRU F = 3, H = 4, 2 layers: 2·12·(3 + 4) + 2·12·(4 + 4).
  EXPECT_DOUBLE_EQ(flops_per_step({"gru", 3, 4, 2}, "ce", 2).model_gemm, 168.0 + 192.0);
  // RNN F = 64, H = 256: 2·256·320.
  EXPECT_DOUBLE_EQ(flops_per_step({"rnn", 64, 256, 1}, "mse", 1).model_gemm, 163840.0);
  // Elementwise: LSTM 21·H, GRU 17·H, RNN 4·H per layer.
  EXPECT_DOUBLE_EQ(flops_per_step({"lstm", 3, 4, 2}, "ce", 2).model_elementwise, 2 * 21.0 * 4);
  EXPECT_DOUBLE_EQ(flops_per_step({"gru", 3, 4, 1}, "ce", 2).model_elementwise, 17.0 * 4);
  // The hand-written cells count as the cells they compute.
  EXPECT_DOUBLE_EQ(flops_per_step({"lstm_block", 3, 4, 2}, "ce", 2).forward(),
                   flops_per_step({"lstm", 3, 4, 2}, "ce", 2).forward());
  EXPECT_DOUBLE_EQ(flops_per_step({"gru_v2", 3, 4, 2}, "ce", 2).forward(),
                   flops_per_step({"gru", 3, 4, 2}, "ce", 2).forward());
  // Head: Linear 4 -> 3 = 2·4·3 GEMM; ce: 3 bias + 4·3 loss + 2 weighting.
  const auto head = flops_per_step({"lstm", 3, 4, 1}, "ce", 3);
  EXPECT_DOUBLE_EQ(head.head_gemm, 24.0);
  EXPECT_DOUBLE_EQ(head.head_elementwise, 3.0 + 12.0 + 2.0);
  EXPECT_DOUBLE_EQ(head.backward(), 2.0 * head.forward());
}

TEST(FlopModel, UsefulIsForwardPlusBackwardOverEveryValidStep) {
  const auto per_step = flops_per_step({"lstm", 8, 16, 1}, "ce", 4);
  const StepCounters full{100, 0, 100};
  const auto flops = iteration_flops(per_step, 100, 3, 300, full);
  EXPECT_DOUBLE_EQ(flops.useful(), 300 * 3.0 * per_step.forward());
  EXPECT_DOUBLE_EQ(flops.recomputed, 0.0);
  EXPECT_DOUBLE_EQ(flops.overhead(), 0.0);
}

TEST(FlopModel, RecomputedComesFromTheCounters) {
  const auto per_step = flops_per_step({"gru", 8, 16, 2}, "mse", 2);
  // VLRNN, T = 100, K = 10: 90 steps run without grad (model only), 100 with grad.
  const auto vlrnn = iteration_flops(per_step, 100, 3, 300, StepCounters{100, 90, 100});
  EXPECT_DOUBLE_EQ(vlrnn.recomputed, 3 * 90 * per_step.model_forward());
  // A method that re-runs 20 steps with grad (model and head) beyond the T it must.
  const auto replay = iteration_flops(per_step, 100, 3, 300, StepCounters{120, 0, 100});
  EXPECT_DOUBLE_EQ(replay.recomputed, 3 * 20 * per_step.forward());
  EXPECT_NEAR(vlrnn.overhead(), 90.0 * per_step.model_forward() / (300.0 * per_step.forward()),
              1e-12);
}

TEST(FlopModel, RejectsBadArguments) {
  testing::expect_error_mentions([] { flops_per_step({"lstmx", 3, 4, 1}, "ce", 2); },
                                 {"model.kind", "lstm", "lstmx"});
  testing::expect_error_mentions([] { flops_per_step({"lstm", 3, 4, 1}, "hinge", 2); },
                                 {"head_kind", "hinge"});
  testing::expect_error_mentions(
      [] { iteration_flops(flops_per_step({"lstm", 3, 4, 1}, "ce", 2), 10, 2, 21, {}); },
      {"valid_steps", "20", "21"});
}

}  // namespace
}  // namespace vlrnn::measure
