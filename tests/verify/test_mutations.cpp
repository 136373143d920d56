// Mutation testing of the verifier: deliberately broken methods and models, injected through
// the same case runner `vlrnn verify` uses (run_case with a CaseInjection), must each fail
// their case, with the row naming a wrong tensor. A verifier that passes these would pass
// wrong gradients.
#include "test_util.h"

#include "vlrnn/schedule/bidirectional_vlrnn.h"
#include "vlrnn/verify/case.h"

namespace vlrnn::verify {
namespace {

// ---- Broken methods: a real method whose result is then damaged ----

// Runs `inner` (the method the case names), then lets `damage` break what it produced.
class DamagedMethod : public GradientMethod {
 public:
  using Damage = std::function<void(const Workload&, GradientResult&)>;
  DamagedMethod(std::unique_ptr<GradientMethod> inner, Damage damage)
      : inner_(std::move(inner)), damage_(std::move(damage)) {}
  std::string name() const override { return "damaged " + inner_->name(); }

 protected:
  GradientResult compute_impl(const Workload& workload) override {
    auto result = inner_->compute(workload);
    damage_(workload, result);
    return result;
  }

 private:
  std::unique_ptr<GradientMethod> inner_;
  Damage damage_;
};

CaseInjection damaged(DamagedMethod::Damage damage) {
  CaseInjection injection;
  injection.make_method = [damage](const VerifyCase& c) -> std::unique_ptr<GradientMethod> {
    return std::make_unique<DamagedMethod>(make_method_from_spec(c.method), damage);
  };
  return injection;
}

// Drops the gradient one block's backward sends to every model parameter: the n-th backward
// call that reaches a parameter (VLRNN runs one per block) gets zeros.
class DropOneBlocksParameterGradient : public GradientMethod {
 public:
  explicit DropOneBlocksParameterGradient(std::unique_ptr<GradientMethod> inner)
      : inner_(std::move(inner)) {}
  std::string name() const override { return "drop-one-block " + inner_->name(); }

 protected:
  GradientResult compute_impl(const Workload& workload) override {
    std::vector<std::pair<torch::Tensor, unsigned>> hooks;
    for (auto& p : workload.model.parameters()) {
      auto calls = std::make_shared<int>(0);
      hooks.emplace_back(p, p.register_hook([calls](torch::Tensor grad) {
        return ++*calls == 2 ? torch::zeros_like(grad) : grad;
      }));
    }
    auto result = inner_->compute(workload);
    for (auto& [p, id] : hooks) p.remove_hook(id);
    return result;
  }

 private:
  std::unique_ptr<GradientMethod> inner_;
};

// MEAN that ignores lengths: every sequence weighted as if it had T steps (the loss is the
// SUM over valid steps divided by T·B instead of a mean over each sequence's own length).
class MeanIgnoringLengths : public GradientMethod {
 public:
  explicit MeanIgnoringLengths(std::unique_ptr<GradientMethod> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "mean-ignoring-lengths " + inner_->name(); }

 protected:
  GradientResult compute_impl(const Workload& workload) override {
    const double scale = 1.0 / double(workload.batch.time_steps() * workload.batch.batch_size());
    Workload summed = workload;
    summed.reduction = Reduction::kSum;
    // The seed of the final state is no part of the loss's weighting: scaled up here, so the
    // scaling below leaves it as it was.
    std::vector<torch::Tensor> seed;
    for (const auto& g : workload.final_state_grad) seed.push_back(g / scale);
    summed.final_state_grad = State(std::move(seed));
    auto result = inner_->compute(summed);
    torch::NoGradGuard no_grad;
    for (auto& p : workload.model.parameters()) if (p.grad().defined()) p.mutable_grad().mul_(scale);
    for (auto& p : workload.head.parameters()) if (p.grad().defined()) p.mutable_grad().mul_(scale);
    for (const auto& h : workload.h0) if (h.grad().defined()) h.mutable_grad().mul_(scale);
    const auto& x = workload.batch.inputs;
    if (x.grad().defined()) x.mutable_grad().mul_(scale);
    result.loss = result.loss * scale;
    return result;
  }

 private:
  std::unique_ptr<GradientMethod> inner_;
};

template <typename Mutant>
CaseInjection wrapped_method() {
  CaseInjection injection;
  injection.make_method = [](const VerifyCase& c) -> std::unique_ptr<GradientMethod> {
    return std::make_unique<Mutant>(make_method_from_spec(c.method));
  };
  return injection;
}

// ---- Broken models: a correct model wrapped so that it misbehaves the way an engine bug or
// a careless user model would; full BPTT runs the same wrapped model ----

class BrokenModel : public RecurrentModule {
 public:
  enum class Fault {
    kDeltaHNotPassed,     // one recomputed block starts from a detached entry: no δh flows
    kRngNotRestored,      // recomputation draws other masks than the first pass did
    kBoundaryOffByOne,    // the first stored block entry is one step early
    kFinishedNotFrozen,   // a sequence that has ended still advances one step per block
    kMasksPerCall,        // a locked input-dropout mask drawn once per call (not per step)
  };
  BrokenModel(std::shared_ptr<RecurrentModule> inner, Fault fault)
      : inner_(register_module("inner", inner)), fault_(fault) {}

  std::pair<torch::Tensor, State> forward(const torch::Tensor& x, const State& h,
                                          const torch::Tensor& lengths) override {
    const bool grad = torch::GradMode::is_enabled();
    const int64_t call = grad ? ++grad_calls_ : ++no_grad_calls_;
    switch (fault_) {
      case Fault::kDeltaHNotPassed:
        if (grad && call == 2) return inner_->forward(x, h.detached(), lengths);
        break;
      case Fault::kRngNotRestored:
        if (grad) torch::rand({1});
        break;
      case Fault::kBoundaryOffByOne:
        if (!grad && call == 1 && x.size(0) > 1) {
          const int64_t n = x.size(0) - 1;
          auto shorter = lengths.defined() ? lengths.clamp_max(n) : lengths;
          return inner_->forward(x.narrow(0, 0, n), h, shorter);
        }
        break;
      case Fault::kFinishedNotFrozen:
        if (lengths.defined()) return inner_->forward(x, h, lengths.clamp_min(1));
        break;
      case Fault::kMasksPerCall: {
        // One mask per sequence and feature, shared by every step of the call ("locked"
        // dropout): one call over T steps and T/K calls draw different masks.
        auto keep = torch::bernoulli(torch::full({x.size(1), x.size(2)}, 0.7)).to(x.dtype());
        return inner_->forward(x * keep / 0.7, h, lengths);
      }
    }
    return inner_->forward(x, h, lengths);
  }
  int64_t input_size() const override { return inner_->input_size(); }
  int64_t output_size() const override { return inner_->output_size(); }
  std::vector<StateSpec> state_spec() const override { return inner_->state_spec(); }

 private:
  std::shared_ptr<RecurrentModule> inner_;
  Fault fault_;
  int64_t grad_calls_ = 0, no_grad_calls_ = 0;
};

CaseInjection broken_model(BrokenModel::Fault fault) {
  CaseInjection injection;
  injection.wrap_model = [fault](std::shared_ptr<RecurrentModule> model) {
    return std::shared_ptr<RecurrentModule>(std::make_shared<BrokenModel>(model, fault));
  };
  return injection;
}

// ---- The cases ----

// A float64 LSTM case cut into 4 blocks, h0 with grad, inputs with grad.
VerifyCase lstm_case(const std::string& method = "vlrnn:block_length=7") {
  VerifyCase c;
  c.model = "lstm";
  c.num_layers = 2;
  c.head = "mse";
  c.method = method;
  c.dtype = torch::kFloat64;
  return c;
}

VerifyCase variable_length_case(std::vector<int64_t> lengths) {
  VerifyCase c = lstm_case();
  c.lengths = std::move(lengths);
  c.batch = int64_t(c.lengths.size());
  return c;
}

// The mutant must fail its case without an error, its row naming a tensor that starts with
// `worst_prefix`; the same case without the mutant must pass.
void expect_caught(const VerifyCase& c, const CaseInjection& mutant, const std::string& worst_prefix) {
  const auto healthy = run_case(c);
  ASSERT_TRUE(healthy.passed) << c.name() << " " << c.method << " fails without a mutant: "
                              << healthy.error << " worst " << healthy.diff.worst;
  const auto outcome = run_case(c, mutant);
  ASSERT_TRUE(outcome.error.empty()) << outcome.error;
  EXPECT_FALSE(outcome.passed) << "a broken method passed " << c.name() << " " << c.method
                               << " (max rel " << outcome.diff.max_rel << ")";
  EXPECT_GT(outcome.diff.max_rel, outcome.tolerance);
  EXPECT_EQ(outcome.diff.worst.rfind(worst_prefix, 0), 0u)
      << "worst tensor " << outcome.diff.worst << ", expected one starting with " << worst_prefix;
}

TEST(Mutations, GradientsScaledByOnePlus1e6AreCaughtInFloat64) {
  auto scale = damaged([](const Workload& w, GradientResult&) {
    torch::NoGradGuard no_grad;
    for (auto& p : w.model.parameters()) p.mutable_grad().mul_(1.0 + 1e-6);
  });
  expect_caught(lstm_case(), scale, "grad model.");
  expect_caught(lstm_case("checkpoint:segments=3"), scale, "grad model.");
}

TEST(Mutations, OneBlocksParameterGradientDroppedIsCaught) {
  expect_caught(lstm_case(), wrapped_method<DropOneBlocksParameterGradient>(), "grad model.");
}

TEST(Mutations, DeltaHNotPassedAcrossOneBlockBoundaryIsCaught) {
  expect_caught(lstm_case(), broken_model(BrokenModel::Fault::kDeltaHNotPassed), "grad ");
}

TEST(Mutations, RngNotRestoredBeforeRecomputingABlockUnderDropoutIsCaught) {
  VerifyCase c = lstm_case();
  c.num_layers = 3;
  c.dropout = 0.3;
  expect_caught(c, broken_model(BrokenModel::Fault::kRngNotRestored), "");
}

TEST(Mutations, ABlockBoundaryOffByOneIsCaught) {
  expect_caught(lstm_case(), broken_model(BrokenModel::Fault::kBoundaryOffByOne), "");
}

TEST(Mutations, MissingDLossDH0IsCaught) {
  auto drop_h0_grad = damaged([](const Workload& w, GradientResult&) {
    for (const auto& h : w.h0) h.mutable_grad() = torch::Tensor();
  });
  expect_caught(lstm_case(), drop_h0_grad, "grad h0[");
}

TEST(Mutations, MeanIgnoringLengthsIsCaughtOnVariableLengths) {
  // With every sequence T long the two weightings agree, so only variable lengths catch it:
  // the matrix and the random set have them for this reason.
  const auto c = variable_length_case({17, 28, 1, 4});
  expect_caught(c, wrapped_method<MeanIgnoringLengths>(), "");
  VerifyCase fixed = lstm_case();
  EXPECT_TRUE(run_case(fixed, wrapped_method<MeanIgnoringLengths>()).passed);
}

TEST(Mutations, AFinishedSequenceWhoseStateIsNotFrozenIsCaught) {
  // Only block methods see a block in which a sequence has no step left; with a padded tail
  // (no sequence reaches T) whole blocks are padding.
  // Without a seed of the final state, the final state is what differs most; with one
  // (h0 with grad: a call inside a stream), its gradient through the steps past the end
  // also differs.
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{17, 28, 1, 4},
                                              std::vector<int64_t>{17, 9, 1, 4}}) {
    VerifyCase c = variable_length_case(lengths);
    expect_caught(c, broken_model(BrokenModel::Fault::kFinishedNotFrozen), "");
    c.h0_with_grad = false;
    expect_caught(c, broken_model(BrokenModel::Fault::kFinishedNotFrozen), "final_state[");
  }
}

TEST(Mutations, MasksDrawnPerCallAreCaughtAndNamedInPlainWords) {
  const auto outcome = run_case(lstm_case(), broken_model(BrokenModel::Fault::kMasksPerCall));
  ASSERT_TRUE(outcome.error.empty()) << outcome.error;
  EXPECT_FALSE(outcome.passed);
  EXPECT_NE(outcome.diagnosis.find("depend on where the sequence is cut"), std::string::npos)
      << "diagnosis: " << outcome.diagnosis;
  EXPECT_NE(outcome.diagnosis.find("one step at a time"), std::string::npos);
  // A correct model gets no such diagnosis, even when it fails for another reason.
  auto scale = damaged([](const Workload& w, GradientResult&) {
    torch::NoGradGuard no_grad;
    for (auto& p : w.model.parameters()) p.mutable_grad().mul_(2.0);
  });
  const auto other = run_case(lstm_case(), scale);
  EXPECT_FALSE(other.passed);
  EXPECT_TRUE(other.diagnosis.empty()) << other.diagnosis;
}

// bivlrnn whose backward directions' sweep visits the blocks last to first instead of first
// to last (NOTE [ Bidirectional blocks ]): each block's exit gets δh from the wrong block.
class BackwardSweepReversed : public BidirectionalVlrnn {
 public:
  using BidirectionalVlrnn::BidirectionalVlrnn;

 protected:
  std::vector<int64_t> backward_direction_sweep(int64_t num_blocks) const override {
    auto order = BidirectionalVlrnn::backward_direction_sweep(num_blocks);
    std::reverse(order.begin(), order.end());
    return order;
  }
};

TEST(Mutations, BidirectionalSecondSweepInTheWrongOrderIsCaught) {
  CaseInjection mutant;
  mutant.make_method = [](const VerifyCase&) -> std::unique_ptr<GradientMethod> {
    return std::make_unique<BackwardSweepReversed>(BidirectionalVlrnnOptions().with_block_length(7));
  };
  VerifyCase c;
  c.model = "bilstm";
  c.head = "mse";
  c.method = "bivlrnn:block_length=7";
  expect_caught(c, mutant, "grad ");
  c.lengths = {17, 28, 1, 4};
  c.batch = 4;
  expect_caught(c, mutant, "grad ");
}

// bivlrnn that counts the head's parameter gradient twice (once per sweep) is caught.
TEST(Mutations, BidirectionalHeadGradientCountedTwiceIsCaught) {
  auto twice = damaged([](const Workload& w, GradientResult&) {
    torch::NoGradGuard no_grad;
    for (auto& p : w.head.parameters()) p.mutable_grad().mul_(2.0);
  });
  VerifyCase c;
  c.model = "bigru";
  c.method = "bivlrnn:block_length=5";
  expect_caught(c, twice, "grad head.");
}

}  // namespace
}  // namespace vlrnn::verify
