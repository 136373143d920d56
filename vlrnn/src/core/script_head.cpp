#include "vlrnn/core/script_head.h"

#include "script_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <sstream>

namespace vlrnn {
namespace {

constexpr const char* kHeadForwardSignature = "forward(self, z: Tensor, y: Tensor) -> Tensor";

// An int attribute's value, or none.
c10::optional<int64_t> int_attribute(const torch::jit::Module& module, const std::string& name) {
  if (!module.hasattr(name) || !module.attr(name).isInt()) return c10::nullopt;
  return module.attr(name).toInt();
}

}  // namespace

std::shared_ptr<ScriptHead> ScriptHead::load(const std::string& path, bool sparse_targets) {
  TORCH_CHECK(std::ifstream(path).good(), "head file \"", path,
              "\": cannot read it (expected a TorchScript module saved with "
              "torch.jit.script(head).save(path), e.g. by scripts/export_head.py)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "head file \"", path, "\": expected a TorchScript module "
                "(torch.jit.script(head).save(path)), torch::jit::load failed: ",
                e.what_without_backtrace());
  }
  return wrap(std::move(module), "head file \"" + path + "\"", sparse_targets);
}

std::shared_ptr<ScriptHead> ScriptHead::wrap(torch::jit::Module module, const std::string& origin,
                                             bool sparse_targets) {
  std::shared_ptr<ScriptHead> head(new ScriptHead(std::move(module), origin, sparse_targets));
  head->check_signature();
  head->probe_forward();
  return head;
}

ScriptHead::ScriptHead(torch::jit::Module module, std::string origin, bool sparse_targets)
    : module_(std::move(module)), origin_(std::move(origin)), sparse_targets_(sparse_targets) {
  register_script_tensors(*this, module_);  // script_common.h
  OutputModule::train(module_.is_training());
}

void ScriptHead::check_signature() {
  // NOTE [ The TorchScript head signature ] (script_head.h).
  auto forward_method = module_.find_method("forward");
  if (!forward_method) {
    std::vector<std::string> names;
    for (const auto& m : module_.get_methods()) names.push_back(m.name());
    TORCH_CHECK(false, origin_, ": expected a method ", kHeadForwardSignature,
                ", found none (methods: ", fmt::format("{}", fmt::join(names, ", ")), ")");
  }
  const auto& schema = forward_method->function().getSchema();
  std::ostringstream found;
  found << schema;
  const size_t arity = schema.arguments().size() - 1;  // without self
  TORCH_CHECK(arity == 2, origin_, ": expected ", kHeadForwardSignature,
              " (2 arguments: z [T, B, Z] and the targets y), found ", found.str(), " (", arity,
              ")");
  const auto input_size = int_attribute(module_, "input_size");
  TORCH_CHECK(input_size, origin_, ": expected an int attribute input_size (Z, the features of z "
              "per step: self.input_size = Z in __init__), found ",
              module_.hasattr("input_size") ? module_.attr("input_size").type()->str() : "none");
  input_size_ = *input_size;
  TORCH_CHECK(input_size_ >= 1, origin_, ": input_size: expected >= 1, found ", input_size_);
  // Which targets it reads (NOTE [ Head targets ]): exactly one of the two attributes.
  const auto classes = int_attribute(module_, "num_classes");
  const auto values = int_attribute(module_, "target_size");
  TORCH_CHECK(classes.has_value() != values.has_value(), origin_, ": expected exactly one int "
              "attribute saying which targets y forward reads: num_classes (C: y [T, B] int64 "
              "class indices) or target_size (O: y [T, B, O] values), found ",
              classes ? "both" : "neither");
  targets_ = classes ? HeadTargets{HeadTargets::Kind::kClasses, *classes}
                     : HeadTargets{HeadTargets::Kind::kValues, *values};
  TORCH_CHECK(targets_.size >= (classes ? 2 : 1), origin_, ": ",
              classes ? "num_classes: expected >= 2" : "target_size: expected >= 1", ", found ",
              targets_.size);
}

void ScriptHead::probe_forward() {
  // A tiny call in eval mode without gradients, on deterministic data: T = 3 steps, B = 2
  // sequences (T != B, so a transposed loss shows).
  torch::NoGradGuard no_grad;
  const bool was_training = module_.is_training();
  module_.eval();
  auto options = torch::TensorOptions().dtype(torch::kFloat32);
  for (const auto& p : module_.parameters()) {
    options = p.options();
    break;
  }
  const int64_t Z = input_size_, C = targets_.size;
  const auto z = torch::linspace(-1.0, 1.0, 6 * Z, options).reshape({3, 2, Z});  // [T, B, Z]
  const auto y = targets_.kind == HeadTargets::Kind::kClasses
                     ? (torch::arange(6, options.dtype(torch::kLong)) % C).reshape({3, 2})
                     : torch::linspace(-1.0, 1.0, 6 * C, options).reshape({3, 2, C});
  const std::string call = fmt::format("forward(z {}, y {} {})", shape_string(z),
                                       shape_string(y), c10::toString(y.scalar_type()));
  auto run = [&](const torch::Tensor& z_in, const torch::Tensor& y_in) {
    c10::IValue out;
    try {
      out = module_.forward({z_in, y_in});
    } catch (const std::exception& e) {  // a c10::Error, or the interpreter's runtime_error
      TORCH_CHECK(false, origin_, ": ", call, " failed (y as declared: ", targets_.describe(),
                  "): ", error_line(e));
    }
    TORCH_CHECK(out.isTensor(), origin_, ": ", call, ": expected a Tensor (the loss [T, B]), "
                "found ", out.type()->str());
    return out.toTensor();
  };
  // One graph for every run of the probe: the executor's optimised graph (2.x fuses after
  // the first runs) rounds otherwise than the profiled one, and the comparison is exact.
  const torch::jit::GraphOptimizerEnabledGuard unoptimised(false);
  const auto loss = run(z, y);
  TORCH_CHECK(loss.dim() == 2 && loss.size(0) == 3 && loss.size(1) == 2, origin_, ": ", call,
              ": expected the loss of each step of each sequence, shape [T, B] = [3, 2] (not "
              "reduced), found ", shape_string(loss));
  TORCH_CHECK(loss.is_floating_point(), origin_, ": ", call, ": expected a floating-point "
              "loss, found ", loss.scalar_type());
  // Per step: moving z at step 1 of sequence 0 may change that loss alone.
  auto z_moved = z.clone();
  z_moved.select(0, 1).select(0, 0).add_(0.5);
  auto changed = run(z_moved, y) != loss;  // [3, 2]
  changed[1][0] = false;
  TORCH_CHECK(!changed.any().item<bool>(), origin_, ": ", call, ": expected loss[t, b] to depend "
              "on z[t, b] and y[t, b] alone, found the loss at other steps or sequences changed "
              "when only z[1, 0] did: forward must not reduce or mix steps (return [T, B])");
  // Padded steps: z and y zero (NOTE [ The TorchScript head signature ]).
  const auto padded = run(torch::zeros_like(z), torch::zeros_like(y));
  TORCH_CHECK(torch::isfinite(padded).all().item<bool>(), origin_, ": forward(z = 0, y = 0): "
              "expected a finite loss (padded steps past a sequence's end get z = 0 and y = 0, "
              "and the engine weights them by zero, which a nan or inf would survive), found ",
              padded);
  module_.train(was_training);
}

torch::Tensor ScriptHead::forward(const torch::Tensor& z_block, const torch::Tensor& y_block) {
  // z_block [T, B, Z]; y_block [T, B] int64 or [T, B, O]
  torch::Tensor present, y = y_block;  // present [T, B]: the steps with a target
  if (sparse_targets_) {
    // NOTE [ Steps without a target ]: the script sees 0 in place of a marker.
    if (targets_.kind == HeadTargets::Kind::kClasses) {
      present = y_block != kNoTarget;
      y = torch::where(present, y_block, torch::zeros_like(y_block));
    } else {
      const auto missing = torch::isnan(y_block);  // [T, B, O]
      present = ~missing.any(-1);
      y = torch::where(missing, torch::zeros_like(y_block), y_block);
    }
  }
  const auto scope = script_call_scope(z_block.device());
  const auto out = module_.forward({z_block, y});
  TORCH_CHECK(out.isTensor() && out.toTensor().dim() == 2 &&
                  out.toTensor().size(0) == z_block.size(0) &&
                  out.toTensor().size(1) == z_block.size(1),
              origin_, ": forward(z ", shape_string(z_block), ", y): expected a loss of shape [T, "
              "B] = [", z_block.size(0), ", ", z_block.size(1), "], found ",
              out.isTensor() ? shape_string(out.toTensor()) : out.type()->str());
  const auto loss = out.toTensor();  // [T, B]
  return present.defined() ? torch::where(present, loss, torch::zeros_like(loss)) : loss;
}

void ScriptHead::check_targets(const torch::Tensor& targets, const std::string& argument) const {
  targets_.check(targets, sparse_targets_, argument, origin_);
}

void ScriptHead::train(bool on) {
  OutputModule::train(on);
  module_.train(on);
}

}  // namespace vlrnn
