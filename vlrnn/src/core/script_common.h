#pragma once
// What the two TorchScript wrappers (script_model.cpp: a model file; script_head.cpp: a head
// file) share: the script module's tensors registered as the wrapper's own, and the one line
// of a TorchScript error worth showing. Internal to vlrnn/src/core.

#include <torch/script.h>
#include <torch/torch.h>

#include <string>

namespace vlrnn {

// Registers the script module's parameters and buffers on `owner` as the same tensors, so
// that gradient methods read owner.parameters(), .grad() accumulates in the script module's
// own, and to() converts both (set_data). nn::Module names may not contain '.':
// "cell.weight_ih" -> "cell_weight_ih".
void register_script_tensors(torch::nn::Module& owner, const torch::jit::Module& module);

// The line of a TorchScript error that says what went wrong (NOTE [ The line of a
// TorchScript error ]).
std::string first_error_line(const std::string& what);

// first_error_line of any exception: a c10::Error without its backtrace, or the
// interpreter's std::runtime_error.
std::string error_line(const std::exception& error);

// A tensor's shape as an error message shows it: "[3, 4]".
std::string shape_string(const torch::Tensor& t);

}  // namespace vlrnn
