#pragma once
// What the two TorchScript wrappers (script_model.cpp: a model file; script_head.cpp: a head
// file) share: the script module's tensors registered as the wrapper's own, and the one line
// of a TorchScript error worth showing. Internal to vlrnn/src/core.

#include <torch/csrc/jit/runtime/graph_executor.h>
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

// NOTE [ Script calls on the CPU run unspecialised ]: the engine calls a script on a new
// shape at every block length and at every sub-batch left as sequences end. TorchScript's
// profiling executor specialises its graph for each new shape, and where PyTorch was built
// with LLVM (Debian's torch, not pip's wheels) it compiles a fused CPU kernel for each, in
// seconds. So on the CPU our calls run with the executor's optimisation off, on this thread
// alone and for the call alone (the switch is per thread): the script runs as its ops, each
// with its eager gradient, and nothing is compiled. On a GPU the executor keeps its default.
// script_call_scope returns the guard that does so; times in docs/models.md.
torch::jit::GraphOptimizerEnabledGuard script_call_scope(const torch::Device& device);

}  // namespace vlrnn
