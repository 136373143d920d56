#include "vlrnn/core/stock_rnn_script.h"

#include "script_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace vlrnn {
namespace {

const std::set<std::string> kStockModes = {"LSTM", "GRU", "RNN_TANH", "RNN_RELU"};

std::string type_of(const torch::jit::Module& module, const std::string& name) {
  return module.hasattr(name) ? module.attr(name).type()->str() : "none";
}

int64_t int_attr(const torch::jit::Module& module, const std::string& origin,
                 const std::string& name) {
  TORCH_CHECK(module.hasattr(name) && module.attr(name).isInt(), origin,
              ": a stock recurrent module: expected an int attribute ", name, ", found ",
              type_of(module, name));
  return module.attr(name).toInt();
}

bool bool_attr(const torch::jit::Module& module, const std::string& origin,
               const std::string& name) {
  TORCH_CHECK(module.hasattr(name) && module.attr(name).isBool(), origin,
              ": a stock recurrent module: expected a bool attribute ", name, ", found ",
              type_of(module, name));
  return module.attr(name).toBool();
}

}  // namespace

bool StockRnnScript::is_stock(const torch::jit::Module& module) {
  return !module.find_method("forward") && module.find_method("forward__0") &&
         module.hasattr("mode") && module.attr("mode").isString() &&
         kStockModes.count(module.attr("mode").toStringRef()) > 0;
}

StockRnnScript::StockRnnScript(torch::jit::Module module, std::string origin)
    : module_(std::move(module)), origin_(std::move(origin)) {
  mode_ = module_.attr("mode").toStringRef();
  input_size_ = int_attr(module_, origin_, "input_size");
  hidden_size_ = int_attr(module_, origin_, "hidden_size");
  num_layers_ = int_attr(module_, origin_, "num_layers");
  batch_first_ = bool_attr(module_, origin_, "batch_first");
  const std::string kind = describe();
  TORCH_CHECK(input_size_ >= 1 && hidden_size_ >= 1 && num_layers_ >= 1, origin_, ": ", kind,
              ": expected input_size, hidden_size and num_layers >= 1");
  TORCH_CHECK(!bool_attr(module_, origin_, "bidirectional"), origin_, ": ", kind,
              ": bidirectional=True is not supported (expected a one-direction module: the "
              "reverse direction reads the steps after a block, so no block method can run "
              "it), found bidirectional=True");
  // proj_size arrived in PyTorch 1.8; a module saved before has none (no projection).
  const int64_t proj_size = module_.hasattr("proj_size") ? int_attr(module_, origin_, "proj_size") : 0;
  TORCH_CHECK(proj_size == 0, origin_, ": ", kind, ": proj_size is not supported (expected "
              "proj_size=0), found proj_size=", proj_size);
  if (module_.hasattr("dropout") && module_.attr("dropout").isDouble()) {
    dropout_ = module_.attr("dropout").toDouble();
  }
}

std::vector<StateSpec> StockRnnScript::state_spec() const {
  // hx is [L, B, H] with the batch at dim 1, batch_first or not (nn.LSTM's documentation).
  std::vector<StateSpec> specs{{"h", {num_layers_, -1, hidden_size_}, 1}};
  if (mode_ == "LSTM") specs.push_back({"c", {num_layers_, -1, hidden_size_}, 1});
  return specs;
}

std::string StockRnnScript::describe() const {
  const std::string name = mode_ == "LSTM" ? "nn.LSTM" : mode_ == "GRU" ? "nn.GRU" : "nn.RNN";
  return fmt::format("{}(F={}, H={}, L={}, batch_first={}, dropout={})", name, input_size_,
                     hidden_size_, num_layers_, batch_first_ ? "True" : "False", dropout_);
}

std::pair<torch::Tensor, std::vector<torch::Tensor>> StockRnnScript::run(
    const torch::Tensor& x, const std::vector<torch::Tensor>& state) const {
  // x [t, b, F]; the module's input is [b, t, F] when batch_first.
  const auto input = batch_first_ ? x.transpose(0, 1) : x;
  const c10::IValue hx =
      mode_ == "LSTM"
          ? c10::IValue(c10::ivalue::Tuple::create(std::vector<c10::IValue>{state[0], state[1]}))
          : c10::IValue(state[0]);
  const auto scope = script_call_scope(x.device());
  const auto out = module_.get_method("forward__0")({input, hx});
  // (output, hx): output [t, b, H] (or [b, t, H]); hx as given.
  TORCH_CHECK(out.isTuple() && out.toTuple()->elements().size() == 2, origin_,
              ": forward__0: expected to return (output, hx), found ", out.type()->str());
  const auto& elements = out.toTuple()->elements();
  auto z = elements[0].toTensor();
  if (batch_first_) z = z.transpose(0, 1);  // [t, b, H]
  std::vector<torch::Tensor> exit;
  if (mode_ == "LSTM") {
    const auto hc = elements[1].toTuple();
    exit = {hc->elements()[0].toTensor(), hc->elements()[1].toTensor()};
  } else {
    exit = {elements[1].toTensor()};
  }
  return {z, exit};
}

std::pair<torch::Tensor, std::vector<torch::Tensor>> StockRnnScript::forward(
    const torch::Tensor& x, const std::vector<torch::Tensor>& state,
    const torch::Tensor& lengths) const {
  // x [T, B, F]; state [L, B, H] each; lengths [B] in [0, T]
  const int64_t steps = x.size(0), batch = x.size(1);
  const auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong).contiguous();
  const auto* length = lengths_cpu.data_ptr<int64_t>();
  if (std::all_of(length, length + batch, [&](int64_t l) { return l == steps; })) {
    return run(x, state);
  }
  // Split at every end (NOTE [ Stock recurrent modules in a model file ]): the pieces
  // [t0, t1) between consecutive distinct lengths run the sequences longer than t0.
  std::set<int64_t> ends(length, length + batch);
  ends.erase(0);
  std::vector<torch::Tensor> pieces;  // z of [t0, t1): [t1 - t0, B, H]
  std::vector<torch::Tensor> current = state;
  int64_t t0 = 0;
  for (const int64_t t1 : ends) {
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batch; ++b) {
      if (length[b] > t0) rows.push_back(b);
    }
    const auto x_piece = x.narrow(0, t0, t1 - t0);  // [t1 - t0, B, F]
    if (int64_t(rows.size()) == batch) {
      auto [z, exit] = run(x_piece, current);
      pieces.push_back(z);
      current = std::move(exit);
    } else {
      const auto active = torch::tensor(rows, torch::kLong).to(x.device());  // [A]
      std::vector<torch::Tensor> entry;  // [L, A, H] each
      for (const auto& s : current) entry.push_back(s.index_select(1, active));
      auto [z, exit] = run(x_piece.index_select(1, active), entry);  // z [t1 - t0, A, H]
      pieces.push_back(torch::zeros({t1 - t0, batch, z.size(2)}, z.options())
                           .index_copy(1, active, z));
      for (size_t i = 0; i < current.size(); ++i) {
        current[i] = current[i].index_copy(1, active, exit[i]);
      }
    }
    t0 = t1;
  }
  if (t0 < steps) {  // every sequence has ended: zeros to the block's end
    pieces.push_back(torch::zeros({steps - t0, batch, hidden_size_}, x.options()));
  }
  return {pieces.size() == 1 ? pieces[0] : torch::cat(pieces, 0), current};
}

}  // namespace vlrnn
