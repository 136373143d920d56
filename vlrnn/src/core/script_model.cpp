#include "vlrnn/core/script_model.h"

#include "script_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <regex>
#include <sstream>

namespace vlrnn {
namespace {

constexpr const char* kModelForwardSignature =
    "forward(self, x: Tensor, state: Tuple[Tensor, ...], lengths: Tensor) -> "
    "Tuple[Tensor, Tuple[Tensor, ...]]";

std::string type_string(const c10::IValue& value) { return value.type()->str(); }

c10::IValue to_tuple(const std::vector<torch::Tensor>& tensors) {
  return c10::ivalue::Tuple::create(std::vector<c10::IValue>(tensors.begin(), tensors.end()));
}

// The tensors of a Tuple[Tensor, ...] that `what` returned.
std::vector<torch::Tensor> tensors_of(const c10::IValue& value, const std::string& origin,
                                      const std::string& what) {
  TORCH_CHECK(value.isTuple(), origin, ": ", what, ": expected a state Tuple[Tensor, ...], found ",
              type_string(value));
  const auto tuple = value.toTuple();
  std::vector<torch::Tensor> tensors;
  for (const auto& element : tuple->elements()) {
    TORCH_CHECK(element.isTensor(), origin, ": ", what,
                ": expected a state Tuple[Tensor, ...], found ", type_string(value));
    tensors.push_back(element.toTensor());
  }
  TORCH_CHECK(!tensors.empty(), origin, ": ", what,
              ": expected a state of at least one tensor, found an empty tuple");
  return tensors;
}

// forward's output: (z, state).
std::pair<torch::Tensor, std::vector<torch::Tensor>> unpack_forward(const c10::IValue& out,
                                                                    const std::string& origin) {
  const bool pair = out.isTuple() && out.toTuple()->elements().size() == 2 &&
                    out.toTuple()->elements()[0].isTensor();
  TORCH_CHECK(pair, origin, ": forward: expected to return (z: Tensor, state: Tuple[Tensor, ...]), found ",
              type_string(out));
  const auto tuple = out.toTuple();
  return {tuple->elements()[0].toTensor(), tensors_of(tuple->elements()[1], origin, "forward's returned state")};
}

// Runs `fn`, the module's own code, during the load-time probe: an error raised inside it is
// rethrown naming `origin`, the call, what it expected, and TorchScript's error in one line,
// not the whole traceback. An empty `call` (not probing) runs `fn` as it is.
template <typename Fn>
auto guarded(const std::string& origin, const std::string& call, const std::string& expected,
             Fn fn) -> decltype(fn()) {
  if (call.empty()) return fn();
  std::string error;
  try {
    return fn();
  } catch (const std::exception& e) {  // a c10::Error, or the interpreter's runtime_error
    error = error_line(e);
  }
  TORCH_CHECK(false, origin, ": ", call, " raised an error in the load-time probe (expected ",
              expected, "); TorchScript's error: ", error);
}

}  // namespace

std::shared_ptr<ScriptModel> ScriptModel::load(const std::string& path) {
  TORCH_CHECK(std::ifstream(path).good(), "model file \"", path,
              "\": cannot read it (expected a TorchScript module saved with "
              "torch.jit.script(cell).save(path), e.g. by scripts/export_cell.py)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "model file \"", path, "\": expected a TorchScript module "
                "(torch.jit.script(cell).save(path)), torch::jit::load failed: ",
                e.what_without_backtrace());
  }
  return wrap(std::move(module), "model file \"" + path + "\"");
}

std::shared_ptr<ScriptModel> ScriptModel::wrap(torch::jit::Module module,
                                               const std::string& origin) {
  std::shared_ptr<ScriptModel> model(new ScriptModel(std::move(module), origin));
  model->probe();
  return model;
}

ScriptModel::ScriptModel(torch::jit::Module module, std::string origin)
    : module_(std::move(module)), origin_(std::move(origin)) {
  register_script_tensors(*this, module_);  // script_common.h
  RecurrentModule::train(module_.is_training());
}

void ScriptModel::probe() {
  check_signature();
  probe_forward(probe_initial_state());
}

void ScriptModel::check_signature() {
  if (StockRnnScript::is_stock(module_)) {  // its own signature, adapted
    stock_.emplace(module_, origin_);
    input_size_ = stock_->input_size();
    return;
  }
  // The signature (NOTE [ The TorchScript model signature ] in script_model.h).
  auto forward_method = module_.find_method("forward");
  if (!forward_method) {
    std::vector<std::string> names;
    for (const auto& m : module_.get_methods()) names.push_back(m.name());
    TORCH_CHECK(false, origin_, ": expected a method ", kModelForwardSignature,
                " (or a scripted stock torch.nn.LSTM / GRU / RNN), found none (methods: ",
                fmt::format("{}", fmt::join(names, ", ")), ")");
  }
  const auto& schema = forward_method->function().getSchema();
  std::ostringstream found;
  found << schema;
  const size_t arity = schema.arguments().size() - 1;  // without self
  TORCH_CHECK(arity == 3, origin_, ": expected ", kModelForwardSignature, " (3 arguments), found ",
              found.str(), " (", arity, ")");
  const auto& state_type = schema.arguments()[2].type();
  TORCH_CHECK(state_type->kind() == c10::TypeKind::TupleType, origin_,
              ": forward's state argument: expected Tuple[Tensor, ...] (a one-tensor state is "
              "Tuple[Tensor]), found ", state_type->str(), " in ", found.str());
  TORCH_CHECK(module_.hasattr("input_size") && module_.attr("input_size").isInt(), origin_,
              ": expected an int attribute input_size (F, the features of each step: "
              "self.input_size = F in __init__), found ",
              module_.hasattr("input_size") ? type_string(module_.attr("input_size")) : "none");
  input_size_ = module_.attr("input_size").toInt();
  TORCH_CHECK(input_size_ >= 1, origin_, ": input_size: expected >= 1, found ", input_size_);
}

std::vector<torch::Tensor> ScriptModel::probe_initial_state() {
  if (stock_) {  // hx: zeros [L, B, H], as hx=None is
    state_spec_ = stock_->state_spec();
    return initial_state(2, parameter_options()).tensors();
  }
  auto init = module_.find_method("initial_state");
  TORCH_CHECK(init, origin_, ": expected a method initial_state(self, batch: int) -> "
              "Tuple[Tensor, ...] (the zero state of `batch` sequences), found none");
  auto call_init = [&](int64_t batch) {
    const auto call = fmt::format("initial_state({})", batch);
    return tensors_of(guarded(origin_, call, fmt::format("the zero state of {} sequences", batch),
                              [&] { return (*init)({c10::IValue(batch)}); }),
                      origin_, call);
  };
  const auto s2 = call_init(2);
  const auto s3 = call_init(3);
  TORCH_CHECK(s2.size() == s3.size(), origin_, ": initial_state: expected the same number of "
              "tensors for every batch size, found ", s2.size(), " for 2 and ", s3.size(), " for 3");
  state_spec_.clear();
  for (size_t i = 0; i < s2.size(); ++i) {
    // The batch dimension: the one that is 2 for two sequences and 3 for three.
    std::vector<int64_t> batch_dims;
    bool same_rank = s2[i].dim() == s3[i].dim();
    for (int64_t d = 0; same_rank && d < s2[i].dim(); ++d) {
      if (s2[i].size(d) == 2 && s3[i].size(d) == 3) {
        batch_dims.push_back(d);
      } else if (s2[i].size(d) != s3[i].size(d)) {
        same_rank = false;
      }
    }
    TORCH_CHECK(same_rank && batch_dims.size() == 1, origin_, ": initial_state tensor ", i,
                ": expected the batch in exactly one dimension (its size the batch, the others "
                "fixed), found ", shape_string(s2[i]), " for batch 2 and ", shape_string(s3[i]),
                " for batch 3");
    StateSpec spec{fmt::format("state{}", i), s2[i].sizes().vec(), batch_dims[0]};
    spec.shape[size_t(batch_dims[0])] = -1;
    state_spec_.push_back(spec);
  }
  return s2;
}

void ScriptModel::probe_forward(const std::vector<torch::Tensor>& s2) {
  // A tiny call: T = 3 steps, B = 2 sequences (T != B, so a transposed z shows), the second
  // ending after one step; in eval
  // mode (no dropout draws) and with deterministic data, so the probe leaves the
  // generators alone.
  torch::NoGradGuard no_grad;
  const bool was_training = module_.is_training();
  module_.eval();
  const auto options = parameter_options();
  const int64_t F = input_size_;
  auto x = torch::linspace(-1.0, 1.0, 6 * F, options).reshape({3, 2, F});  // [T, B, F]
  std::vector<torch::Tensor> entry;
  for (const auto& s : s2) entry.push_back(s.to(options) + 0.5);  // nonzero: freezing shows
  const auto long_options = torch::TensorOptions().dtype(torch::kLong).device(options.device());
  const std::string call = fmt::format("forward(x [3, 2, {}], state, lengths [3, 1])", F);
  auto [z, exit] = call_forward(x, entry, torch::tensor({3, 1}, long_options), call);
  TORCH_CHECK(z.dim() == 3 && z.size(0) == 3 && z.size(1) == 2 && z.size(2) >= 1, origin_, ": ",
              call, ": expected z of shape [T, B, H] = [3, 2, H], found ", shape_string(z));
  output_size_ = z.size(2);
  TORCH_CHECK(exit.size() == entry.size(), origin_, ": ", call, ": expected a state of ",
              entry.size(), " tensors (as initial_state gives), found ", exit.size());
  for (size_t i = 0; i < exit.size(); ++i) {
    TORCH_CHECK(exit[i].sizes() == entry[i].sizes(), origin_, ": ", call, ": returned state "
                "tensor ", i, ": expected the entry's shape ", shape_string(entry[i]),
                ", found ", shape_string(exit[i]));
  }
  TORCH_CHECK(z.slice(0, 1).select(1, 1).eq(0).all().item<bool>(), origin_, ": ", call,
              ": expected z zero past each sequence's end (sequence 1 has 1 valid step), found "
              "nonzero values at steps 1-2 of sequence 1: forward must honour lengths");
  auto [z0, frozen] = call_forward(x, entry, torch::tensor({3, 0}, long_options),
                                  fmt::format("forward(x [3, 2, {}], state, lengths [3, 0])", F));
  for (size_t i = 0; i < frozen.size(); ++i) {
    const auto d = state_spec_[i].batch_dim;
    TORCH_CHECK(frozen[i].select(d, 1).equal(entry[i].select(d, 1)), origin_,
                ": forward(x, state, lengths [3, 0]): expected sequence 1 (no valid step) to "
                "keep its entry state, found state tensor ", i,
                " changed: forward must honour lengths");
  }
  module_.train(was_training);
}

std::pair<torch::Tensor, State> ScriptModel::forward(const torch::Tensor& x_block,
                                                     const State& h_entry,
                                                     const torch::Tensor& lengths) {
  // x_block [T, B, F]; lengths [B] valid steps in this block (T each when absent)
  const auto valid =
      lengths.defined()
          ? lengths.to(x_block.device(), torch::kLong)
          : torch::full({x_block.size(1)}, x_block.size(0),
                        torch::TensorOptions().dtype(torch::kLong).device(x_block.device()));
  auto [z, exit] = call_forward(x_block, h_entry.tensors(), valid, /*probe_call=*/"");
  return {z, State(std::move(exit))};  // z [T, B, H]
}

std::pair<torch::Tensor, std::vector<torch::Tensor>> ScriptModel::call_forward(
    const torch::Tensor& x, const std::vector<torch::Tensor>& state,
    const torch::Tensor& lengths, const std::string& probe_call) {
  // x [T, B, F]; lengths [B] int64 on x's device
  const std::string expected =
      probe_call.empty()
          ? ""
          : fmt::format("x laid out [T, B, F], time first: T = {} steps, B = {} sequences, "
                        "F = {} features; a model written batch first must transpose it "
                        "(x.transpose(0, 1))",
                        x.size(0), x.size(1), x.size(2));
  if (stock_) {
    const auto call = probe_call.empty() ? "" : stock_->describe() + "'s forward__0 for " + probe_call;
    return guarded(origin_, call, expected, [&] { return stock_->forward(x, state, lengths); });
  }
  const auto scope = script_call_scope(x.device());
  const auto out = guarded(origin_, probe_call, expected,
                           [&] { return module_.forward({x, to_tuple(state), lengths}); });
  return unpack_forward(out, origin_);
}

torch::TensorOptions ScriptModel::parameter_options() const {
  for (const auto& p : module_.parameters()) return p.options();
  return torch::TensorOptions().dtype(torch::kFloat32);
}

std::string ScriptModel::describe() const {
  return fmt::format("ScriptModel({}{}) {}", origin_, stock_ ? ", " + stock_->describe() : "",
                     RecurrentModule::describe());
}

void ScriptModel::train(bool on) {
  RecurrentModule::train(on);
  module_.train(on);
}

}  // namespace vlrnn
