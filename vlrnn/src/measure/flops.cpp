#include "vlrnn/measure/flops.h"

#include "vlrnn/cells/selective_ssm.h"
#include "vlrnn/core/bidirectional.h"

#include <algorithm>
#include <optional>

namespace vlrnn::measure {
namespace {

struct LayerFlops {
  double gemm = 0.0, elementwise = 0.0;
};

// One layer of `cell` with input size `in` and hidden size `h`, one step, one sequence.
LayerFlops layer_flops(CellKind cell, double in, double h) {
  switch (cell) {
    case CellKind::kRnnTanh:
      return {2.0 * h * (in + h), 4.0 * h};
    case CellKind::kGru:
      return {2.0 * 3.0 * h * (in + h), 17.0 * h};
    case CellKind::kLstm:
    default:
      return {2.0 * 4.0 * h * (in + h), 21.0 * h};
  }
}

LayerFlops stack_flops(CellKind cell, int64_t input_size, int64_t hidden, int64_t layers) {
  LayerFlops total;
  for (int64_t l = 0; l < layers; ++l) {
    const auto f = layer_flops(cell, double(l == 0 ? input_size : hidden), double(hidden));
    total.gemm += f.gemm;
    total.elementwise += f.elementwise;
  }
  return total;
}

// The cell of a model kind that is one stack of L layers of one cell; the hand-written
// cells count as the cell they compute (lstm_block and lstm_cells as lstm, gru_v1 .. gru_v4
// as gru).
std::optional<CellKind> stacked_cell(const std::string& kind) {
  if (kind == "rnn") return CellKind::kRnnTanh;
  if (kind == "gru" || kind == "gru_v1" || kind == "gru_v2" || kind == "gru_v3" ||
      kind == "gru_v4") {
    return CellKind::kGru;
  }
  if (kind == "lstm" || kind == "lstm_block" || kind == "lstm_cells") return CellKind::kLstm;
  return std::nullopt;
}

// One layer of a linear recurrence (vlrnn/cells/linear_recurrence.h), one step, one sequence,
// as the step loop computes it: the scan's extra products count as no useful work
// (flops.h, the linear recurrences).
std::optional<LayerFlops> linear_layer_flops(const std::string& kind, double in, double h) {
  if (kind == "mingru") return LayerFlops{2.0 * 2.0 * h * in, 7.0 * h};
  if (kind == "minlstm") return LayerFlops{2.0 * 3.0 * h * in, 11.0 * h};
  if (kind == "lru") return LayerFlops{2.0 * (3.0 * h * in + 2.0 * h * h), 12.0 * h};
  if (kind == "ssm") {
    const double n = double(kSsmStateSize);
    return LayerFlops{2.0 * h * (2.0 * in + 2.0 * h + 2.0 * n), 11.0 * h + 7.0 * h * n};
  }
  return std::nullopt;
}

std::optional<LayerFlops> linear_stack_flops(const std::string& kind, int64_t input_size,
                                             int64_t hidden, int64_t layers) {
  if (!linear_layer_flops(kind, 1.0, 1.0)) return std::nullopt;
  LayerFlops total;
  for (int64_t l = 0; l < layers; ++l) {
    const auto f = *linear_layer_flops(kind, double(l == 0 ? input_size : hidden), double(hidden));
    total.gemm += f.gemm;
    total.elementwise += f.elementwise;
  }
  return total;
}

LayerFlops twice(const LayerFlops& f) { return {2.0 * f.gemm, 2.0 * f.elementwise}; }

// The model's forward FLOPs, one step, one sequence; none for a kind the table does not know.
// A bidirectional kind runs both directions over every step: twice a direction's work.
std::optional<LayerFlops> model_flops(const std::string& kind, int64_t input_size, int64_t hidden,
                                      int64_t layers) {
  if (const auto cell = stacked_cell(kind)) return stack_flops(*cell, input_size, hidden, layers);
  if (kind == "gru_lstm") {
    // As make_model builds it: GRU F -> H (1 layer), then LSTM H -> H (3 layers).
    const auto gru = stack_flops(CellKind::kGru, input_size, hidden, 1);
    const auto lstm = stack_flops(CellKind::kLstm, hidden, hidden, 3);
    return LayerFlops{gru.gemm + lstm.gemm, gru.elementwise + lstm.elementwise};
  }
  if (const auto linear = linear_stack_flops(kind, input_size, hidden, layers)) return linear;
  if (kind == "bilstm" || kind == "bigru") {
    // LibTorch's bidirectional=true: layer l > 0 reads [forward h, backward h], 2H wide.
    const auto cell = kind == "bilstm" ? CellKind::kLstm : CellKind::kGru;
    LayerFlops total;
    for (int64_t l = 0; l < layers; ++l) {
      const auto f = twice(layer_flops(cell, double(l == 0 ? input_size : 2 * hidden), double(hidden)));
      total.gemm += f.gemm;
      total.elementwise += f.elementwise;
    }
    return total;
  }
  const std::string prefix = kBidirectionalPrefix;
  if (kind.rfind(prefix, 0) == 0) {
    // "bi:<kind>": two independent `kind` models of L layers each, F -> H.
    const auto inner = kind.substr(prefix.size());
    if (is_bidirectional_kind(inner)) return std::nullopt;  // not a model (make_model refuses it)
    if (const auto direction = model_flops(inner, input_size, hidden, layers)) return twice(*direction);
  }
  return std::nullopt;
}

}  // namespace

FlopsPerStep flops_per_step(const ModelConfig& model, const std::string& head_kind,
                            int64_t head_outputs) {
  TORCH_CHECK(model.input_size > 0 && model.hidden_size > 0 && model.num_layers >= 1,
              "flops_per_step model: expected input_size > 0, hidden_size > 0 and "
              "num_layers >= 1, got ", model.input_size, ", ", model.hidden_size, ", ",
              model.num_layers);
  TORCH_CHECK(head_outputs >= 1, "flops_per_step head_outputs: expected >= 1, got ",
              head_outputs);
  const auto body = model_flops(model.kind, model.input_size, model.hidden_size, model.num_layers);
  TORCH_CHECK(body, "flops_per_step model.kind: expected rnn, gru, lstm, gru_lstm, gru_v1 .. "
              "gru_v4, lstm_block, mingru, minlstm, lru, ssm, bilstm, bigru or bi:<one of "
              "those left-to-right kinds>, got \"", model.kind, "\"");
  TORCH_CHECK(head_kind == "ce" || head_kind == "mse",
              "flops_per_step head_kind: expected \"ce\" or \"mse\", got \"", head_kind, "\"");
  // The head reads Z features: [forward h, backward h] for a bidirectional kind.
  const double z = double(is_bidirectional_kind(model.kind) ? 2 * model.hidden_size
                                                            : model.hidden_size);
  const double c = double(head_outputs);
  FlopsPerStep out;
  out.model_gemm = body->gemm;
  out.model_elementwise = body->elementwise;
  out.head_gemm = 2.0 * z * c;
  out.head_elementwise = c + (head_kind == "ce" ? 4.0 * c : 3.0 * c) + 2.0;
  return out;
}

namespace {

double weight_gemm_flops(const torch::nn::Module& module) {
  double flops = 0.0;
  for (const auto& p : module.parameters()) {
    if (p.dim() == 2) flops += 2.0 * double(p.size(0)) * double(p.size(1));
  }
  return flops;
}

}  // namespace

bool has_flop_model(const std::string& model_kind) {
  return model_flops(model_kind, 1, 1, 1).has_value();
}

FlopsPerStep flops_from_weights(const torch::nn::Module& model, const torch::nn::Module& head,
                                const std::string& head_kind, int64_t head_outputs) {
  TORCH_CHECK(head_kind == "ce" || head_kind == "mse",
              "flops_from_weights head_kind: expected \"ce\" or \"mse\", got \"", head_kind, "\"");
  const double c = double(head_outputs);
  FlopsPerStep out;
  out.model_gemm = weight_gemm_flops(model);
  out.head_gemm = weight_gemm_flops(head);
  out.head_elementwise = c + (head_kind == "ce" ? 4.0 * c : 3.0 * c) + 2.0;
  return out;
}

IterationFlops iteration_flops(const FlopsPerStep& per_step, int64_t time_steps, int64_t batch,
                     int64_t valid_steps, const StepCounters& counters) {
  TORCH_CHECK(time_steps > 0 && batch > 0, "iteration_flops: expected T > 0 and B > 0, got T = ",
              time_steps, ", B = ", batch);
  TORCH_CHECK(valid_steps >= 0 && valid_steps <= time_steps * batch,
              "iteration_flops valid_steps: expected in [0, T·B = ", time_steps * batch, "], got ",
              valid_steps);
  IterationFlops out;
  out.useful_forward = double(valid_steps) * per_step.forward();
  out.useful_backward = double(valid_steps) * per_step.backward();
  // Counters count steps of the whole batch (padded steps included), so they scale by B.
  const double extra_with_grad =
      double(std::max<int64_t>(0, counters.forward_with_grad - time_steps));
  out.recomputed = double(batch) * (double(counters.forward_no_grad) *
                                        per_step.model_forward() +
                                    extra_with_grad * per_step.forward());
  return out;
}

}  // namespace vlrnn::measure
