#include "script_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>
#include <sstream>
#include <vector>

namespace vlrnn {

torch::jit::GraphOptimizerEnabledGuard script_call_scope(const torch::Device& device) {
  return torch::jit::GraphOptimizerEnabledGuard(!device.is_cpu() &&
                                                torch::jit::getGraphExecutorOptimize());
}

void register_script_tensors(torch::nn::Module& owner, const torch::jit::Module& module) {
  auto local_name = [](std::string name) {
    for (auto& ch : name) ch = ch == '.' ? '_' : ch;
    return name;
  };
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    owner.register_parameter(local_name(p.name), p.value, p.value.requires_grad());
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    owner.register_buffer(local_name(b.name), b.value);
  }
}

// NOTE [ The line of a TorchScript error ]: the line that says what went wrong. The
// interpreter's message is "The following operation failed in the TorchScript
// interpreter.", one or two tracebacks ("File ..." and the source lines, indented as the
// source is), then the error itself, "RuntimeError: ..." (or the Python class the script
// raised); that line is the one wanted. Any other message gives its first non-empty line.
std::string first_error_line(const std::string& what) {
  static const std::regex error_pattern(R"(^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception): .*)");
  std::istringstream lines(what);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t") != std::string::npos) all.push_back(line);
  }
  if (all.empty()) return "(no message)";
  if (all[0].rfind("The following operation failed in the TorchScript interpreter", 0) != 0) {
    return all[0];
  }
  for (size_t i = all.size(); i-- > 1;) {
    if (std::regex_match(all[i], error_pattern)) return all[i];
  }
  return all.back();
}

std::string error_line(const std::exception& error) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&error);
  return first_error_line(c10_error ? c10_error->what_without_backtrace() : error.what());
}

std::string shape_string(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes().vec(), ", "));
}

}  // namespace vlrnn
