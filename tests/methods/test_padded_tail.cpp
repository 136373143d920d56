// Batches padded past every sequence's end (max(lengths) < T, e.g. a batch padded to a
// bucket length), and padding holding NaN: every method runs, exact methods equal full BPTT,
// and no padding reaches a gradient — also for a user model that computes every step and
// honours lengths only by masking.
#include "test_util.h"
#include "vlrnn/methods/block.h"

namespace vlrnn {
namespace {

struct Gradients {
  torch::Tensor loss;
  std::vector<torch::Tensor> tensors;  // parameter gradients, then dL/dx when asked for
};

Gradients spec_gradients(const std::string& spec, RecurrentModule& model, OutputModule& head,
                         const SequenceBatch& batch) {
  for (auto& p : model.parameters()) p.mutable_grad() = torch::Tensor();
  for (auto& p : head.parameters()) p.mutable_grad() = torch::Tensor();
  if (batch.inputs.requires_grad()) batch.inputs.mutable_grad() = torch::Tensor();
  torch::manual_seed(11);
  auto result = make_method_from_spec(spec)->compute({model, head, batch});
  Gradients g{result.loss, {}};
  for (auto& p : model.parameters()) {
    g.tensors.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  }
  for (auto& p : head.parameters()) g.tensors.push_back(p.grad().clone());
  if (batch.inputs.requires_grad()) g.tensors.push_back(batch.inputs.grad().clone());
  return g;
}

void expect_equal(const Gradients& got, const Gradients& want, const std::string& label) {
  EXPECT_TRUE(torch::allclose(got.loss, want.loss, 1e-10, 1e-12)) << label;
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << label;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    EXPECT_TRUE(torch::isfinite(got.tensors[i]).all().item<bool>()) << label << " tensor " << i;
    const double scale = want.tensors[i].abs().max().item<double>();
    const double diff = (got.tensors[i] - want.tensors[i]).abs().max().item<double>();
    EXPECT_LE(diff, 1e-10 * std::max(scale, 1e-30)) << label << " tensor " << i;
  }
}

// The repro: LSTM F=3 H=8, T=12, B=3, lengths {5, 3, 6}, MSE head.
TEST(PaddedTail, EveryMethodRunsAndExactOnesEqualFull) {
  for (bool inputs_grad : {true, false}) {
    torch::manual_seed(5);
    auto model = make_model({"lstm", 3, 8, 1});
    model->to(torch::kFloat64);
    auto head = make_head("mse", 8, 2);
    head->to(torch::kFloat64);
    SequenceBatch batch;
    batch.inputs = torch::randn({12, 3, 3}, torch::kFloat64);
    batch.targets = torch::randn({12, 3, 2}, torch::kFloat64);
    batch.lengths = torch::tensor({5, 3, 6}, torch::kLong);
    if (inputs_grad) batch.inputs.requires_grad_(true);
    const auto reference = spec_gradients("full", *model, *head, batch);
    for (const std::string spec : {"vlrnn:block_length=4", "vlrnn:block_length=1", "vlrnn", "checkpoint:segments=4",
                                   "checkpoint:segments=3,head_inside=0", "revolve:slots=2",
                                   "planner:percent=5", "tbptt:k=12", "tbptt:k=4"}) {
      const std::string label = spec + (inputs_grad ? " (inputs require grad)" : "");
      Gradients got;
      ASSERT_NO_THROW(got = spec_gradients(spec, *model, *head, batch)) << label;
      if (make_method_from_spec(spec)->is_exact() || spec == "tbptt:k=12") {
        expect_equal(got, reference, label);
      }
      if (inputs_grad) {  // steps no sequence reaches get no input gradient
        EXPECT_EQ(batch.inputs.grad().narrow(0, 6, 6).abs().max().item<double>(), 0.0) << label;
      }
    }
  }
}

// A user's Elman RNN that runs every step on the whole batch and honours lengths only by
// masking: the state freezes and the output is zero past a sequence's end.
class MaskingElman : public RecurrentModule {
 public:
  MaskingElman(int64_t input_size, int64_t hidden_size) : hidden_size_(hidden_size) {
    cell_ = register_module("cell", torch::nn::Linear(input_size + hidden_size, hidden_size));
  }
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h_entry,
                                          const torch::Tensor& lengths) override {
    auto h = h_entry[0][0];  // [B, H]
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < x.size(0); ++t) {
      auto next = torch::tanh(cell_(torch::cat({x[t], h}, 1)));  // [B, H]
      if (lengths.defined()) {
        auto active = (lengths > t).to(x.device()).unsqueeze(1);  // [B, 1]
        next = torch::where(active, next, h);
        outputs.push_back(torch::where(active, next, torch::zeros_like(next)));
      } else {
        outputs.push_back(next);
      }
      h = next;
    }
    return {torch::stack(outputs), State{h.unsqueeze(0)}};
  }
  int64_t input_size() const override { return cell_->options.in_features() - hidden_size_; }
  int64_t output_size() const override { return hidden_size_; }
  std::vector<StateSpec> state_spec() const override { return {{"h", {1, -1, hidden_size_}, 1}}; }

 private:
  int64_t hidden_size_;
  torch::nn::Linear cell_{nullptr};
};

// A batch of float64 inputs [T, B, F] and class targets (4 classes) whose padding is zero,
// and the same batch with NaN padding (and ignored targets there).
struct PaddedPair {
  SequenceBatch clean, dirty;
};

PaddedPair padded_pair(int64_t T, int64_t F, const std::vector<int64_t>& lengths) {
  const auto B = int64_t(lengths.size());
  PaddedPair pair;
  auto& clean = pair.clean;
  clean.inputs = torch::randn({T, B, F}, torch::kFloat64);
  clean.targets = torch::randint(0, 4, {T, B}, torch::kLong);
  clean.lengths = torch::tensor(lengths, torch::kLong);
  auto padded = torch::arange(T).unsqueeze(1) >= clean.lengths.unsqueeze(0);  // [T, B]
  clean.inputs.masked_fill_(padded.unsqueeze(-1), 0.0);
  pair.dirty = clean;
  pair.dirty.inputs = clean.inputs.masked_fill(padded.unsqueeze(-1), NAN);
  pair.dirty.targets = clean.targets.masked_fill(padded, -100);
  return pair;
}

TEST(PaddedTail, NanPaddingNeverReachesAGradientOfAUserModel) {
  torch::manual_seed(9);
  auto model = std::make_shared<MaskingElman>(3, 6);
  model->to(torch::kFloat64);
  auto head = make_head("ce", 6, 4);
  head->to(torch::kFloat64);
  auto [clean, dirty] = padded_pair(10, 3, {10, 2, 7, 1});
  for (bool inputs_grad : {false, true}) {
    clean.inputs = clean.inputs.detach().requires_grad_(inputs_grad);
    dirty.inputs = dirty.inputs.detach().requires_grad_(inputs_grad);
    const auto reference = spec_gradients("full", *model, *head, clean);
    for (const std::string spec : {"full", "vlrnn:block_length=3", "checkpoint:segments=2",
                                   "checkpoint:segments=2,head_inside=0", "revolve:slots=2",
                                   "tbptt:k=10"}) {
      expect_equal(spec_gradients(spec, *model, *head, dirty), reference,
                   spec + " with nan padding" + (inputs_grad ? ", inputs require grad" : ""));
    }
  }
}

// The built-in LibTorch modules never read padding (they pack it away), so they are handed
// the batch's inputs themselves: NaN padding must still reach no gradient.
TEST(PaddedTail, NanPaddingNeverReachesAGradientOfTheBuiltInModels) {
  for (const std::string kind : {"rnn", "gru", "lstm", "gru_lstm"}) {
    torch::manual_seed(13);
    auto model = make_model({kind, 3, 6, kind == "lstm" ? 2 : 1});
    model->to(torch::kFloat64);
    ASSERT_FALSE(model->reads_padding()) << kind;
    auto head = make_head("ce", 6, 4);
    head->to(torch::kFloat64);
    auto [clean, dirty] = padded_pair(70, 3, {70, 2, 67, 30});  // four runs between ends
    for (bool inputs_grad : {false, true}) {
      clean.inputs = clean.inputs.detach().requires_grad_(inputs_grad);
      dirty.inputs = dirty.inputs.detach().requires_grad_(inputs_grad);
      const auto reference = spec_gradients("full", *model, *head, clean);
      for (const std::string spec : {"full", "vlrnn:block_length=3", "vlrnn:block_length=64"}) {
        expect_equal(
            spec_gradients(spec, *model, *head, dirty), reference,
            kind + " " + spec + " with nan padding" + (inputs_grad ? ", inputs require grad" : ""));
      }
    }
  }
}

// A model that says it reads no padding gets the inputs themselves; one that may read it
// gets a copy with the padding zeroed.
class InputRecorder : public MaskingElman {
 public:
  InputRecorder(bool reads_padding) : MaskingElman(3, 6), reads_padding_(reads_padding) {}
  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h_entry,
                                          const torch::Tensor& lengths) override {
    seen = x;
    return MaskingElman::forward(x, h_entry, lengths);
  }
  bool reads_padding() const override { return reads_padding_; }
  torch::Tensor seen;

 private:
  bool reads_padding_;
};

TEST(PaddedTail, OnlyAModelThatReadsPaddingGetsAZeroFilledCopy) {
  for (bool reads : {true, false}) {
    InputRecorder model(reads);
    auto head = make_head("ce", 6, 4);
    SequenceBatch batch;
    batch.inputs = torch::full({5, 2, 3}, NAN);
    batch.targets = torch::zeros({5, 2}, torch::kLong);
    batch.lengths = torch::tensor({5, 3}, torch::kLong);
    const Workload workload{model, *head, batch};
    run_model(workload, batch.inputs, 0, 5, model.initial_state(2, batch.inputs.options()));
    if (reads) {
      EXPECT_NE(model.seen.data_ptr(), batch.inputs.data_ptr());
      EXPECT_EQ(model.seen.narrow(0, 3, 2).select(1, 1).abs().max().item<float>(), 0.0f);
    } else {
      EXPECT_EQ(model.seen.data_ptr(), batch.inputs.data_ptr());
    }
  }
}

}  // namespace
}  // namespace vlrnn
