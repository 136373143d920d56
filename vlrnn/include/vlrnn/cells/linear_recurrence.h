#pragma once
// LinearRecurrence: what the linear-recurrence models share (MinGru and MinLstm,
// vlrnn/cells/min_rnn.h; Lru, vlrnn/cells/lru.h; SelectiveSsm, vlrnn/cells/selective_ssm.h).
// In each layer the gates depend on the input only, never on the state, so a whole block's
// coefficients come from one GEMM over all its steps and the state follows
//   h_t = a_t ⊙ h_{t-1} + b_t
// which runs as a scan (vlrnn/cells/linear_scan.h) or, as the reference, as a step loop
// (RecurrenceForm). A layer's output is read from its states (and its input) afterwards.
// Shapes: Tb = steps, B = batch, F = input features, H = hidden (every layer's output),
// L = layers, I = a layer's input size (F for layer 0, H above), S... = a layer's scan state
// (e.g. [B, H]). State: the components state_spec() names, each [L, B, W].
//
// NOTE [ Lengths in a linear recurrence ]
// A step past a sequence's end becomes a = 1, b = 0 (selected with masked_fill, not
// multiplied), so the state is carried unchanged to the block's exit, and its output is
// selected to 0. The input's padding is filled with 0 before the layer's GEMMs, so that even
// nan padding reaches no gradient (0 · nan would be nan in dW = xᵀ · dy).
//
// Dropout between layers is drawn one step at a time as in every stacked model (NOTE
// [ Dropout masks drawn per step ] in vlrnn/core/layer_stack.h).

#include "vlrnn/cells/linear_scan.h"
#include "vlrnn/core/recurrent_module.h"

#include <string>
#include <vector>

namespace vlrnn {

class LinearRecurrence : public RecurrentModule {
 public:
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return hidden_size_; }
  std::vector<StateSpec> state_spec() const override;
  std::string describe() const override;  // the form too: same parameters, other costs

  int64_t num_layers() const { return num_layers_; }
  double dropout() const { return dropout_; }
  RecurrenceForm form() const { return form_; }
  // Switches between the scan and the step loop; the function computed stays the same.
  void set_form(RecurrenceForm form) { form_ = form; }

 protected:
  // One state component: its name and its width W per layer ([L, B, W]).
  struct StateComponent {
    std::string name;
    int64_t width;
  };
  LinearRecurrence(std::vector<StateComponent> state, int64_t input_size, int64_t hidden_size,
                   int64_t num_layers, double dropout, RecurrenceForm form);

  // A layer's recurrence over a block: a, b [Tb, S...]; `saved` holds whatever readout() needs.
  struct Coefficients {
    torch::Tensor a, b;
    std::vector<torch::Tensor> saved;
  };
  // x [Tb, B, I] with its padding zeroed.
  virtual Coefficients coefficients(int64_t layer, const torch::Tensor& x) = 0;
  // h [Tb, S...], x [Tb, B, I] -> z [Tb, B, H].
  virtual torch::Tensor readout(int64_t layer, const torch::Tensor& h, const torch::Tensor& x,
                                const Coefficients& c) = 0;
  // A layer's slice of the state (each [1, B, W]) <-> its scan state [S...]. The default
  // serves one real component whose scan state is [B, W].
  virtual torch::Tensor to_scan_state(const State& entry) const;
  virtual State from_scan_state(const torch::Tensor& h) const;

  int64_t layer_input_size(int64_t layer) const { return layer == 0 ? input_size_ : hidden_size_; }
  // A holder named "layer{l}" for layer l's parameters, registered by the constructor.
  torch::nn::Module& layer_module(int64_t layer) { return *layer_modules_.at(size_t(layer)); }

 private:
  std::pair<torch::Tensor, State> forward_layer(int64_t layer, const torch::Tensor& x,
                                                const State& entry, const torch::Tensor& mask);

  std::vector<StateComponent> state_;
  int64_t input_size_, hidden_size_, num_layers_;
  double dropout_;
  RecurrenceForm form_;
  std::vector<std::shared_ptr<torch::nn::Module>> layer_modules_;
};

}  // namespace vlrnn
