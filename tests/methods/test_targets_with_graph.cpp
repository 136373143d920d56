// Targets with a graph (NOTE [ Targets with a graph ] in vlrnn/methods/gradient_method.h):
// targets an encoder computes from a parameter get their gradient through every exact method
// as chain rule gives it from full BPTT's dL/dy, with variable lengths (the padding's masking
// is a node every block shares), the encoder's graph back-propagated once, also when the
// method was prepared first.
// Float64, 1e-10 relative. Shapes: T = 9 steps, B = 3 sequences, F = 3 features, H = 4
// hidden, O = 2 target features.
#include "test_util.h"

namespace vlrnn::targets_test {
namespace {

using testing::expect_close;
using testing::Named;

constexpr int64_t kSteps = 9, kBatch = 3, kFeatures = 3, kHidden = 4, kOut = 2;

struct Problem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  torch::Tensor x, lengths, raw, encoder;  // [T, B, F], [B], [T, B, O], [O]
  int hook_calls = 0;

  Problem() {
    torch::manual_seed(11);
    model = make_model({"gru", kFeatures, kHidden, 1});
    model->to(torch::kFloat64);
    head = make_head("mse", model->output_size(), kOut);
    head->to(torch::kFloat64);
    x = torch::randn({kSteps, kBatch, kFeatures}, torch::kFloat64);
    lengths = torch::tensor(std::vector<int64_t>{9, 9, 6}, torch::kLong);
    raw = torch::randn({kSteps, kBatch, kOut}, torch::kFloat64);
    encoder = torch::randn({kOut}, torch::kFloat64).requires_grad_(true);
    encoder.register_hook([this](const torch::Tensor& grad) {
      ++hook_calls;
      return grad;
    });
  }

  // The encoder's targets: tanh keeps its result for the backward, which a second pass
  // through it would find freed.
  torch::Tensor targets() const { return torch::tanh(raw * encoder); }  // [T, B, O]

  Named gradients() const {
    Named out;
    for (const auto& p : model->named_parameters()) {
      out["model." + p.key()] = p.value().grad().clone();
    }
    for (const auto& p : head->named_parameters()) {
      out["head." + p.key()] = p.value().grad().clone();
    }
    out["encoder"] = encoder.grad().clone();
    return out;
  }

  // `method` on `inputs` and `y` (SUM); `prepared`: prepare() first, on the same workload,
  // as a driver that measures its steps does.
  Named computed_by(GradientMethod& method, const torch::Tensor& inputs, const torch::Tensor& y,
                    bool prepared = false) {
    testing::clear_grads(*model, *head, {encoder});
    const Workload workload{*model, *head, SequenceBatch{inputs, y, lengths}, {},
                            Reduction::kSum};
    if (prepared) method.prepare(workload);
    method.compute(workload);
    return gradients();
  }
  // ... with the encoder's targets.
  Named computed_by(GradientMethod& method, bool prepared = false) {
    return computed_by(method, x, targets(), prepared);
  }

  // Full BPTT on `inputs` and `y` as data, then chain rule by hand: dL/dx (when x requires
  // grad) and dL/dy into the encoder.
  Named by_chain_rule(const torch::Tensor& inputs, const torch::Tensor& y) {
    testing::clear_grads(*model, *head, {encoder});
    const auto x_leaf = inputs.requires_grad() ? inputs.detach().requires_grad_(true) : inputs;
    const auto y_leaf = y.detach().requires_grad_(true);
    make_method("full")->compute(Workload{*model, *head, SequenceBatch{x_leaf, y_leaf, lengths},
                                          {}, Reduction::kSum});
    std::vector<torch::Tensor> roots{y}, grads{y_leaf.grad()};
    if (inputs.requires_grad()) {
      roots.push_back(inputs);
      grads.push_back(x_leaf.grad());
    }
    torch::autograd::backward(roots, grads);
    return gradients();
  }
  Named by_chain_rule() { return by_chain_rule(x, targets()); }
};

TEST(TargetsWithGraph, EveryExactMethodEqualsFullBpttAndChainRule) {
  const std::vector<std::string> specs = {
      "full", "vlrnn:block_length=1", "vlrnn:block_length=4", "checkpoint:segments=3",
      "revolve:slots=2", "planner:percent=20", "online:slots=2"};
  testing::expect_every_exact_method_in(specs, "targets-with-a-graph");
  Problem p;
  const Named reference = p.by_chain_rule();
  for (const auto& spec : specs) {
    p.hook_calls = 0;
    expect_close(p.computed_by(*make_method_from_spec(spec)), reference, 1e-10, spec);
    EXPECT_EQ(p.hook_calls, 1) << spec << ": the encoder's graph back-propagated once";
  }
}

// Preparing (the planner's calibration and plan check) runs gradient steps of its own on the
// workload: they leave the caller's graph to the step, which enters it once.
TEST(TargetsWithGraph, PreparingFirstLeavesTheGraphToTheStep) {
  Problem p;
  const Named reference = p.by_chain_rule();
  for (const std::string spec : {"planner:percent=20", "planner:percent=90", "vlrnn"}) {
    p.hook_calls = 0;
    expect_close(p.computed_by(*make_method_from_spec(spec), /*prepared=*/true), reference,
                 1e-10, spec);
    EXPECT_EQ(p.hook_calls, 1) << spec << ": the encoder's graph back-propagated once";
  }
}

// Next-step prediction in an encoder's space: x = e[:-1] and y = e[1:] of one encoder output
// e, whose graph the method enters once for both (x's leaf and y's, one backward).
TEST(TargetsWithGraph, InputsAndTargetsFromOneEncoderEnterItOnce) {
  Problem p;
  const auto raw_sequence = torch::randn({kSteps + 1, kBatch, kFeatures}, torch::kFloat64);
  auto encoded = [&] { return torch::tanh(raw_sequence * p.encoder.narrow(0, 0, 1)); };
  // x [T, B, F], y [T, B, O] (O <= F) of one e [T + 1, B, F].
  auto split = [](const torch::Tensor& e) {
    return std::make_pair(e.narrow(0, 0, kSteps), e.narrow(0, 1, kSteps).narrow(2, 0, kOut));
  };
  const auto [x, y] = split(encoded());
  const Named reference = p.by_chain_rule(x, y);
  for (const std::string spec : {"full", "vlrnn:block_length=4", "checkpoint:segments=3",
                                 "planner:percent=20"}) {
    for (const bool prepared : {false, true}) {
      p.hook_calls = 0;
      const auto [x_again, y_again] = split(encoded());  // a graph of its own each time
      expect_close(p.computed_by(*make_method_from_spec(spec), x_again, y_again, prepared),
                   reference, 1e-10, spec);
      EXPECT_EQ(p.hook_calls, 1) << spec << ": the encoder's graph back-propagated once";
    }
  }
}

}  // namespace
}  // namespace vlrnn::targets_test
