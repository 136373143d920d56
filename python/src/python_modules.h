#pragma once
// A user's Python recurrent module and head as the engine's RecurrentModule and
// OutputModule: the engine calls them back once per block, taking the GIL only for that call.
// Shapes: Tb = steps in the block, B = batch, F = input features, Z = model output features.
//
// NOTE [ Python modules in the engine ]
// The Python layer (python/vlrnn/_adapters.py) hands the engine a function per module in the
// engine's time-major layout, block(x [Tb, B, F], state, lengths [B] or None) -> (z, state)
// and head(z [Tb, B, Z], y) -> loss [Tb, B]; those convert to the user's layout and check what
// comes back. This side only moves tensors across (the same TensorImpl, no copy) and the GIL:
// - the engine runs with the GIL released (the autograd engine refuses to run while it is
//   held); each callback takes it, checks for a pending signal (so Ctrl-C stops a long call
//   at the next block), calls Python and lets it go;
// - a Python exception crosses the engine as pybind11::error_already_set, so Python gets the
//   original back; the engine's handlers (NOTE [ Generators on failure ]) run on the way out.
// Parameters are registered under their Python names ('.' becomes '/', which LibTorch's names
// may not contain) as the same tensors, so checks, snapshots and .grad see the user's own.

#include "vlrnn/core/output_module.h"
#include "vlrnn/core/recurrent_module.h"
#include "vlrnn/methods/progress.h"

#include <torch/extension.h>

#include <atomic>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace vlrnn::python {

namespace py = pybind11;

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class PythonModel : public RecurrentModule {
 public:
  // `block`: the adapter described above. `state_shapes`: each state tensor's shape for the
  // batch it was probed with, batch at dim `batch_dim`. `description`: what tells this
  // model apart (the Python class and its parameters' shapes).
  PythonModel(py::function block, int64_t input_size, int64_t output_size,
              const std::vector<std::vector<int64_t>>& state_shapes, int64_t batch_dim,
              const NamedTensors& parameters, std::string description);
  ~PythonModel() override;

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x_block, const State& h_entry,
                                          const torch::Tensor& lengths = {}) override;
  int64_t input_size() const override { return input_size_; }
  int64_t output_size() const override { return output_size_; }
  std::vector<StateSpec> state_spec() const override { return state_spec_; }
  // The adapter packs ended sequences away: padded steps never reach the user's module.
  bool reads_padding() const override { return false; }
  std::string describe() const override { return description_; }

 private:
  py::function block_;
  int64_t input_size_, output_size_;
  std::vector<StateSpec> state_spec_;
  std::string description_;
};

class PythonHead : public OutputModule {
 public:
  PythonHead(py::function head, int64_t input_size, const NamedTensors& parameters);
  ~PythonHead() override;

  torch::Tensor forward(const torch::Tensor& z_block, const torch::Tensor& y_block) override;
  int64_t input_size() const override { return input_size_; }
  // Any targets whose leading dimensions are [T, B] (checked by validated()): what suits
  // the user's head is the head's own business, and its errors reach the caller.
  void check_targets(const torch::Tensor& targets, const std::string& argument) const override {}

 private:
  py::function head_;
  int64_t input_size_;
};

// A schedule's progress (NOTE [ Progress of a long call ]) as calls of a Python callable:
// progress("planned", schedule, T, forward_steps) once, then progress("advanced", done) at
// most every `interval` seconds (the GIL and a Python call per chunk of steps would cost),
// each with the GIL taken for it.
class PythonProgress : public ProgressSink {
 public:
  PythonProgress(py::function progress, double interval)
      : progress_(std::move(progress)), interval_(interval) {}
  ~PythonProgress() override;
  void planned(const std::string& schedule, int64_t time_steps, int64_t forward_steps) override;
  void advanced(int64_t forward_steps_done) override;

 private:
  py::function progress_;
  std::chrono::duration<double> interval_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Set when a KeyboardInterrupt passes through a callback: a caller that turns exceptions into
// results (the verifier's error rows) checks it and stops instead.
std::atomic<bool>& interrupted();

// Set when a Ctrl-C's KeyboardInterrupt was raised inside a finalizer and handed to
// sys.unraisablehook (NOTE [ A Ctrl-C inside a finalizer ] in python/vlrnn/_engine.py): the
// next callback raises it instead of calling Python.
std::atomic<bool>& interrupt_lost();

// Registers `parameters` in `module` under their Python names (NOTE above).
void register_python_parameters(torch::nn::Module& module, const NamedTensors& parameters);

}  // namespace vlrnn::python
