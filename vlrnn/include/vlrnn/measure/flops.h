#pragma once
// An analytical FLOP model of one iteration, from the model's shape alone.
// Shapes: F = input features, H = hidden, L = layers, C = head outputs, per step and per
// sequence; a FLOP is one multiply or one add (a GEMM of [m, k] x [k, n] costs 2·m·k·n).
//
// Forward, per step and sequence, for a layer with input size I (F for layer 0, H above):
//   RNN tanh  GEMM 2·H·(I + H)    elementwise  4·H  (2 bias adds, the sum, tanh)
//   GRU       GEMM 2·3H·(I + H)   elementwise 17·H  (6H biases, gates r, z: add + sigmoid,
//                                                    n = tanh(x_n + r * h_n), h' = (1-z)n + zh)
//   LSTM      GEMM 2·4H·(I + H)   elementwise 21·H  (8H biases, 4H sum, 4H activations,
//                                                    c' = f c + i g, h' = o tanh(c'))
//   gru_lstm  a 1-layer GRU (F -> H) then a 3-layer LSTM (H -> H)
//   gru_v1 .. gru_v4 count as GRU, lstm_block and lstm_cells as LSTM (the same cells)
//   Linear recurrences (vlrnn/cells/linear_recurrence.h), counted as the step loop runs them:
//   the recurrence h = a h + b is 2·H (8·H complex); the scan's extra products and its
//   final fix-up (about 3 more per state element) are not useful work, so a scan's
//   utilization is not inflated by them:
//   mingru    GEMM 2·2H·I             elementwise  7·H  (2H biases, σ, 1 - z, z h̃, a h + b)
//   minlstm   GEMM 2·3H·I             elementwise 11·H  (3H biases, 2 σ, f + i, 2 divides,
//                                                        i' h̃, a h + b)
//   lru       GEMM 2·(3H·I + 2H·H)    elementwise 12·H  (B x re/im, C h re/im, D x; γ 2H,
//                                                        complex a h + b 8H, 2 sums)
//   ssm       GEMM 2·H·(2I + 2H + 2N) elementwise 11·H + 7·H·N (N = 4 states per channel:
//                                                        Δ ⊙ A, exp, input, a h + b, h C_t)
//   bilstm, bigru  both directions of each layer (LibTorch's bidirectional=true): twice the
//             LSTM / GRU layer, layer l > 0 reading I = 2H ([forward h, backward h])
//   bi:<kind> two independent L-layer `kind` models (F -> H): twice `kind`'s count
//   head      Linear Z -> C: GEMM 2·Z·C, C bias adds; loss: cross-entropy ~4·C (max, exp,
//             sum, log) or squared error 3·C; then 2 for the step's weight and the sum.
//             Z = H, or 2H for a bidirectional kind
//
// NOTE [ Backward = 2 x forward ]: every forward GEMM Y = X·W has two backward GEMMs of the
// same size (dX = dY·Wᵀ and dW = Xᵀ·dY), and each elementwise op has about two (its local
// derivative and the chain product). So backward is counted as 2 x forward. It overcounts
// slightly for layer 0's dX when the inputs need no gradient.
//
// Useful FLOPs are those full BPTT performs: forward + backward over every valid step.
// Recomputed FLOPs come from a method's counters: its steps run without grad (the model only)
// plus its steps run with grad beyond T (model and head), times the batch. A bidirectional
// model's counters are in whole-model steps, as its per-step FLOPs are: bivlrnn's 1.5 extra
// forward passes count 1.5 T. bivlrnn's second head run (NOTE [ Bidirectional blocks ]) is not
// counted: up to 3 head forwards per step, small beside the model's.

#include "vlrnn/core/models.h"
#include "vlrnn/methods/gradient_method.h"

#include <string>

namespace vlrnn::measure {

// Forward FLOPs of one time step of one sequence.
struct FlopsPerStep {
  double model_gemm = 0.0, model_elementwise = 0.0;
  double head_gemm = 0.0, head_elementwise = 0.0;  // head, loss and weighting

  double model_forward() const { return model_gemm + model_elementwise; }
  double head_forward() const { return head_gemm + head_elementwise; }
  double forward() const { return model_forward() + head_forward(); }
  double backward() const { return 2.0 * forward(); }  // NOTE [ Backward = 2 x forward ]
};

// `head_kind` is "ce" or "mse" (vlrnn/core/heads.h); `head_outputs` is C or O.
// Throws for a model kind the table above does not know.
FlopsPerStep flops_per_step(const ModelConfig& model, const std::string& head_kind,
                            int64_t head_outputs);

// The fallback for any other model (user modules, new cells): GEMM FLOPs from the weight
// shapes — every 2-D parameter W [out, in] is one GEMM per step, 2·out·in FLOPs — and no
// elementwise term for the model. Exact for the GEMMs of cells that use each weight once
// per step (all of LibTorch's), which is what the table above counts too.
FlopsPerStep flops_from_weights(const torch::nn::Module& model, const torch::nn::Module& head,
                                const std::string& head_kind, int64_t head_outputs);
bool has_flop_model(const std::string& model_kind);  // true: flops_per_step() knows it

// The FLOPs of one iteration.
struct IterationFlops {
  double useful_forward = 0.0;   // forward over every valid step
  double useful_backward = 0.0;  // backward over every valid step
  double recomputed = 0.0;       // extra forward work the method spent (overhead)

  double useful() const { return useful_forward + useful_backward; }
  // Recomputed FLOPs per useful FLOP (0.33 = a third more work than full BPTT).
  double overhead() const { return useful() > 0 ? recomputed / useful() : 0.0; }
};

// `valid_steps` is the number of (step, sequence) pairs that count: T·B, or the sum of the
// lengths of a variable-length batch. `counters` come from the method's GradientResult.
IterationFlops iteration_flops(const FlopsPerStep& per_step, int64_t time_steps, int64_t batch,
                     int64_t valid_steps, const StepCounters& counters);

}  // namespace vlrnn::measure
