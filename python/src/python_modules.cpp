#include "python_modules.h"

#include <algorithm>

namespace vlrnn::python {

namespace {

// Takes the GIL and raises what a signal handler asked for (Ctrl-C: KeyboardInterrupt)
// before calling back into Python (NOTE [ Python modules in the engine ]).
void raise_pending_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  if (interrupt_lost().exchange(false)) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
}

// Calls a Python function, noting a KeyboardInterrupt on its way out (interrupted()).
py::object call_python(const py::function& function, py::args args) {
  try {
    raise_pending_signals();
    return function(*args);
  } catch (py::error_already_set& error) {
    if (error.matches(PyExc_KeyboardInterrupt)) interrupted() = true;
    throw;
  }
}

}  // namespace

std::atomic<bool>& interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}

std::atomic<bool>& interrupt_lost() {
  static std::atomic<bool> flag{false};
  return flag;
}

void register_python_parameters(torch::nn::Module& module, const NamedTensors& parameters) {
  for (const auto& [name, tensor] : parameters) {
    std::string key = name;
    std::replace(key.begin(), key.end(), '.', '/');
    // requires_grad as the user set it: register_parameter would otherwise switch a frozen
    // parameter on.
    module.register_parameter(key, tensor, tensor.requires_grad());
  }
}

PythonProgress::~PythonProgress() {
  py::gil_scoped_acquire gil;
  progress_ = py::function();
}

void PythonProgress::planned(const std::string& schedule, int64_t time_steps,
                             int64_t forward_steps) {
  py::gil_scoped_acquire gil;
  call_python(progress_, py::make_tuple("planned", schedule, time_steps, forward_steps));
}

void PythonProgress::advanced(int64_t forward_steps_done) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < interval_) return;
  last_ = now;
  py::gil_scoped_acquire gil;
  call_python(progress_, py::make_tuple("advanced", forward_steps_done));
}

PythonModel::PythonModel(py::function block, int64_t input_size, int64_t output_size,
                         const std::vector<std::vector<int64_t>>& state_shapes,
                         int64_t batch_dim, const NamedTensors& parameters,
                         std::string description)
    : block_(std::move(block)),
      input_size_(input_size),
      output_size_(output_size),
      description_(std::move(description)) {
  for (size_t i = 0; i < state_shapes.size(); ++i) {
    state_spec_.push_back({"state[" + std::to_string(i) + "]", state_shapes[i], batch_dim});
  }
  register_python_parameters(*this, parameters);
}

PythonModel::~PythonModel() {
  // The last reference may go from C++ without the GIL; a Python object needs it to die.
  py::gil_scoped_acquire gil;
  block_ = py::function();
}

std::pair<torch::Tensor, State> PythonModel::forward(const torch::Tensor& x_block,
                                                     const State& h_entry,
                                                     const torch::Tensor& lengths) {
  py::gil_scoped_acquire gil;
  py::tuple state(h_entry.size());
  for (size_t i = 0; i < h_entry.size(); ++i) state[i] = py::cast(h_entry[i]);
  auto result = call_python(block_, py::make_tuple(
      x_block, state, lengths.defined() ? py::cast(lengths) : py::none()));
  // The adapter has checked the result's structure; this only unpacks it.
  auto pair = result.cast<py::tuple>();
  return {pair[0].cast<torch::Tensor>(),
          State(pair[1].cast<std::vector<torch::Tensor>>())};
}

PythonHead::PythonHead(py::function head, int64_t input_size, const NamedTensors& parameters)
    : head_(std::move(head)), input_size_(input_size) {
  register_python_parameters(*this, parameters);
}

PythonHead::~PythonHead() {
  py::gil_scoped_acquire gil;
  head_ = py::function();
}

torch::Tensor PythonHead::forward(const torch::Tensor& z_block, const torch::Tensor& y_block) {
  py::gil_scoped_acquire gil;
  return call_python(head_, py::make_tuple(z_block, y_block)).cast<torch::Tensor>();
}

}  // namespace vlrnn::python
