#include "test_util.h"

#include "vlrnn/measure/flops.h"
#include "vlrnn/registry/methods.h"

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

struct FlopCase {
  std::string kind;
  int64_t layers;
};

TEST(FlopModel, GemmFlopsMatchTheModulesWeightShapes) {
  for (const auto& c :
       {FlopCase{"rnn", 1}, FlopCase{"rnn", 2}, FlopCase{"gru", 1}, FlopCase{"gru", 3},
        FlopCase{"lstm", 1}, FlopCase{"lstm", 3}, FlopCase{"gru_lstm", 1},
        FlopCase{"lstm_block", 1}, FlopCase{"lstm_block", 3}, FlopCase{"gru_v3", 2},
        FlopCase{"bilstm", 1}, FlopCase{"bilstm", 3}, FlopCase{"bigru", 2}, FlopCase{"bi:lstm", 2},
        FlopCase{"bi:gru_v3", 1}, FlopCase{"mingru", 2}, FlopCase{"minlstm", 1},
        FlopCase{"bi:mingru", 2}}) {
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

// Bidirectional kinds by hand, F = 3, H = 4: both directions of every layer, and the head
// reads Z = 2H.
TEST(FlopModel, BidirectionalKindsCountBothDirections) {
  // bilstm, 2 layers: per direction 2·16·(3 + 4) (layer 0) + 2·16·(8 + 4) (layer 1 reads 2H).
  const auto bilstm = flops_per_step({"bilstm", 3, 4, 2}, "ce", 3);
  EXPECT_DOUBLE_EQ(bilstm.model_gemm, 2.0 * (224.0 + 384.0));
  EXPECT_DOUBLE_EQ(bilstm.model_elementwise, 2.0 * 2.0 * 21.0 * 4.0);
  EXPECT_DOUBLE_EQ(bilstm.head_gemm, 2.0 * 8.0 * 3.0);  // Linear 8 -> 3
  // bigru, 1 layer: 2 · (2·12·(3 + 4)) and 2 · 17·H.
  const auto bigru = flops_per_step({"bigru", 3, 4, 1}, "mse", 2);
  EXPECT_DOUBLE_EQ(bigru.model_gemm, 336.0);
  EXPECT_DOUBLE_EQ(bigru.model_elementwise, 136.0);
  // bi:lstm, 2 layers: two 2-layer LSTMs F -> H, each 2·16·(3 + 4) + 2·16·(4 + 4).
  EXPECT_DOUBLE_EQ(flops_per_step({"bi:lstm", 3, 4, 2}, "ce", 3).model_gemm, 2.0 * (224.0 + 256.0));
  // bi:mingru: two minGRUs, each 2·2H·F GEMM and 7·H elementwise.
  const auto bimingru = flops_per_step({"bi:mingru", 3, 4, 1}, "ce", 3);
  EXPECT_DOUBLE_EQ(bimingru.model_gemm, 2.0 * 48.0);
  EXPECT_DOUBLE_EQ(bimingru.model_elementwise, 2.0 * 28.0);
  EXPECT_TRUE(has_flop_model("bilstm"));
  EXPECT_TRUE(has_flop_model("bi:ssm"));
  EXPECT_FALSE(has_flop_model("bi:my_cell"));
  EXPECT_FALSE(has_flop_model("bi:bilstm"));  // not a model
}

// The linear recurrences by hand, F = 3, H = 4 (the step loop's work; flops.h).
TEST(FlopModel, LinearRecurrencesByHand) {
  // minGRU, 2 layers: [z, h~] = W x: 2·2H·F + 2·2H·H; 7·H per layer.
  const auto mingru = flops_per_step({"mingru", 3, 4, 2}, "ce", 2);
  EXPECT_DOUBLE_EQ(mingru.model_gemm, 48.0 + 64.0);
  EXPECT_DOUBLE_EQ(mingru.model_elementwise, 2.0 * 28.0);
  // minLSTM: [f, i, h~] = W x: 2·3H·F; 11·H.
  const auto minlstm = flops_per_step({"minlstm", 3, 4, 1}, "ce", 2);
  EXPECT_DOUBLE_EQ(minlstm.model_gemm, 72.0);
  EXPECT_DOUBLE_EQ(minlstm.model_elementwise, 44.0);
  // LRU: B x re/im and D x (3·H·F), C h re/im (2·H·H): 2·(36 + 32); 12·H.
  const auto lru = flops_per_step({"lru", 3, 4, 1}, "ce", 2);
  EXPECT_DOUBLE_EQ(lru.model_gemm, 136.0);
  EXPECT_DOUBLE_EQ(lru.model_elementwise, 48.0);
  // Selective SSM, N = 4: 2·H·(2F + 2H + 2N) = 2·4·22; 11·H + 7·H·N = 44 + 112.
  const auto ssm = flops_per_step({"ssm", 3, 4, 1}, "ce", 2);
  EXPECT_DOUBLE_EQ(ssm.model_gemm, 176.0);
  EXPECT_DOUBLE_EQ(ssm.model_elementwise, 156.0);
  // The scan and the step loop do the same useful work: the per-step count does not depend
  // on how a block is computed.
  EXPECT_DOUBLE_EQ(flops_per_step({"mingru", 3, 4, 2}, "ce", 2).forward(), mingru.forward());
}

// bivlrnn's counters are in steps of the whole model: its 1.5 extra forward passes count as
// 1.5·T·B whole-model forwards of recomputation, both directions included.
TEST(FlopModel, BivlrnnRecomputesOneAndAHalfPassesOfBothDirections) {
  auto model = make_model({"bilstm", 3, 4, 1});
  auto head = make_head("ce", model->output_size(), 3);
  SequenceBatch batch{torch::randn({20, 2, 3}), torch::randint(0, 3, {20, 2}), {}};
  const auto result =
      make_method_from_spec("bivlrnn:block_length=5")->compute(Workload{*model, *head, batch});
  const auto per_step = flops_per_step({"bilstm", 3, 4, 1}, "ce", 3);
  const auto flops = iteration_flops(per_step, 20, 2, 40, result.counters);
  EXPECT_DOUBLE_EQ(flops.useful(), 40.0 * 3.0 * per_step.forward());
  EXPECT_DOUBLE_EQ(flops.recomputed, 1.5 * 40.0 * per_step.model_forward());
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
