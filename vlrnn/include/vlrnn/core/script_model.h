#pragma once
// A recurrent model written in Python and saved with TorchScript, wrapped as a
// RecurrentModule, so every gradient method, the verifier and the drivers treat it like a
// built-in. Shapes: T = block steps, B = batch, F = input, H = output features.
//
// NOTE [ The TorchScript model signature ]
// The saved module (torch.jit.script(cell).save(path); scripts/export_cell.py) must have:
//   self.input_size: int                                    F
//   def initial_state(self, batch: int) -> Tuple[Tensor, ...]    the zero state
//   def forward(self, x [T, B, F], state: Tuple[Tensor, ...], lengths [B] int64)
//       -> (z [T, B, H], state after each sequence's last valid step)
// z is zero past each sequence's end, and padded x may hold nan: select with torch.where,
// never multiply by a mask. No block offset is passed, so the module must compute the same
// function wherever a block starts, and draw random numbers one step at a time (NOTE
// [ The RecurrentModule contract ]). The script's parameters are this module's own tensors.
// Details: docs/models.md. A scripted stock nn.LSTM / GRU / RNN needs none of this (NOTE
// [ Stock recurrent modules in a model file ] in stock_rnn_script.h).

#include "vlrnn/core/recurrent_module.h"
#include "vlrnn/core/stock_rnn_script.h"

#include <torch/script.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vlrnn {

class ScriptModel : public RecurrentModule {
 public:
  // Loads `path` with torch::jit::load and checks it (wrap()); throws naming the file.
  static std::shared_ptr<ScriptModel> load(const std::string& path);
  // Checks the signature above with a tiny probe call (3 steps, 2 sequences, one of them
  // ending after step 1) and throws naming `origin` and what was expected and what was
  // found: a missing method or attribute, the wrong arity, a state that is not a tuple of
  // tensors or whose layout changes in forward, a z of the wrong shape, z not zero past a
  // sequence's end, a state not frozen for a sequence with no valid step. An error raised
  // inside the module's own forward (or initial_state) during the probe is rethrown naming
  // `origin`, the call, the shapes given, the [T, B, F] layout expected and TorchScript's
  // error in one line. A stock nn.LSTM / GRU / RNN is recognised and adapted.
  static std::shared_ptr<ScriptModel> wrap(torch::jit::Module module, const std::string& origin);

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return output_size_; }
  std::vector<StateSpec> state_spec() const override { return state_spec_; }
  // A stock module's adapter runs only the valid steps; a user's forward may read padding.
  bool reads_padding() const override { return !stock_.has_value(); }
  std::string describe() const override;
  void train(bool on = true) override;

  const torch::jit::Module& script() const { return module_; }
  // Whether the file is a scripted stock nn.LSTM / GRU / RNN run through the adapter.
  bool is_stock() const { return stock_.has_value(); }

 private:
  ScriptModel(torch::jit::Module module, std::string origin);
  void probe();
  // probe()'s steps: forward's schema and input_size; initial_state and the state layout
  // (returns the state for 2 sequences); one forward call and its shapes and lengths.
  void check_signature();
  std::vector<torch::Tensor> probe_initial_state();
  void probe_forward(const std::vector<torch::Tensor>& state_of_two);
  // One forward call, the user's or the stock adapter's: (z, exit state). `probe_call`
  // names the call during the probe, so an error inside the module names it too.
  std::pair<torch::Tensor, std::vector<torch::Tensor>> call_forward(
      const torch::Tensor& x, const std::vector<torch::Tensor>& state,
      const torch::Tensor& lengths, const std::string& probe_call);
  // The dtype and device of the module's parameters (float32 on the CPU without any).
  torch::TensorOptions parameter_options() const;

  torch::jit::Module module_;
  std::string origin_;  // the file, or what the module came from, for messages
  int64_t input_size_ = 0, output_size_ = 0;
  std::vector<StateSpec> state_spec_;
  std::optional<StockRnnScript> stock_;  // set for a stock nn.LSTM / GRU / RNN
};

}  // namespace vlrnn
