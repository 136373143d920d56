// Heads by name (registry/heads.h) and ScriptHead: a TorchScript head as an OutputModule.
// The heads are written here in TorchScript source (torch::jit::Module::define), so no
// Python is needed; a user's head verifies against full BPTT with every exact method, and
// each broken one fails on wrap() with an error naming what was expected and what was found.
// Shapes: T = steps, B = batch, Z = 3, C = 4 classes or O = 2 values.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/core/script_head.h"
#include "vlrnn/verify/verify_model.h"

namespace vlrnn {
namespace {

// An MLP on z with its own categorical log-likelihood (the example of issue 28).
const std::string kCategorical = R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    logits = torch.matmul(torch.tanh(torch.matmul(z, self.w1)), self.w2)
    log_p = torch.log_softmax(logits, -1)
    return -log_p.gather(-1, y.unsqueeze(-1)).squeeze(-1)
)";

// A Gaussian likelihood with a learned log-variance: y [T, B, 2] values.
const std::string kGaussian = R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    error = (y - torch.matmul(z, self.w1)).pow(2)
    return 0.5 * (self.w2 + error * torch.exp(-self.w2)).sum(-1)
)";

// `forward` with parameters w1 [3, 4] and w2 [4, 4] (categorical) or w1 [3, 2] and w2 [2]
// (gaussian), and the attributes asked for.
torch::jit::Module make_head_script(const std::string& forward, bool classes = true,
                                    bool input_size = true, bool num_classes = true,
                                    bool target_size = false) {
  torch::jit::Module m("Head");
  m.register_attribute("training", c10::BoolType::get(), true);  // as Python's modules have
  if (classes) {
    m.register_parameter("w1", torch::randn({3, 4}).requires_grad_(true), false);
    m.register_parameter("w2", torch::randn({4, 4}).requires_grad_(true), false);
  } else {
    m.register_parameter("w1", torch::randn({3, 2}).requires_grad_(true), false);
    m.register_parameter("w2", (0.1 * torch::randn({2})).requires_grad_(true), false);
  }
  if (input_size) m.register_attribute("input_size", c10::IntType::get(), int64_t(3));
  if (num_classes) m.register_attribute("num_classes", c10::IntType::get(), int64_t(4));
  if (target_size) m.register_attribute("target_size", c10::IntType::get(), int64_t(2));
  if (!forward.empty()) m.define(forward);
  return m;
}

std::shared_ptr<ScriptHead> gaussian_head(bool sparse = false) {
  return ScriptHead::wrap(make_head_script(kGaussian, false, true, false, true), "gauss.pt", sparse);
}

TEST(HeadsRegistry, BuiltinsFirstUnknownKindsListedAddedKindsFound) {
  const auto kinds = head_kinds();
  ASSERT_GE(kinds.size(), 2u);
  EXPECT_EQ(kinds[0], "ce");
  EXPECT_EQ(kinds[1], "mse");
  testing::expect_error_mentions([] { make_head("softmax", 4, 3); },
                                 {"head", "unknown kind \"softmax\"", "known kinds: ce, mse"});
  add_head("test_gaussian", "a TorchScript Gaussian head", [](const HeadConfig& c) {
    EXPECT_TRUE(c.sparse_targets);
    return std::static_pointer_cast<OutputModule>(gaussian_head(c.sparse_targets));
  });
  auto head = make_head("test_gaussian", 3, 2, /*sparse_targets=*/true);
  ASSERT_TRUE(dynamic_cast<ScriptHead*>(head.get()));
  EXPECT_EQ(head_kinds().back(), "test_gaussian");
  testing::expect_error_mentions(
      [] { add_head("ce", "again", [](const HeadConfig& c) { return make_head("mse", c.input_size, 1); }); },
      {"add_head kind", "\"ce\" is already registered"});
}

TEST(HeadsScript, ReadsItsSizesTargetsAndParameters) {
  auto head = ScriptHead::wrap(make_head_script(kCategorical), "head.pt");
  EXPECT_EQ(head->input_size(), 3);
  ASSERT_TRUE(head->targets());
  EXPECT_EQ(*head->targets(), (HeadTargets{HeadTargets::Kind::kClasses, 4}));
  auto values = gaussian_head();
  EXPECT_EQ(*values->targets(), (HeadTargets{HeadTargets::Kind::kValues, 2}));
  // The script module's own tensors: a gradient lands in both; to() converts both.
  ASSERT_EQ(head->parameters().size(), 2u);
  EXPECT_TRUE(head->parameters()[0].is_same(head->script().attr("w1").toTensor()));
  head->to(torch::kFloat64);
  EXPECT_EQ(head->script().attr("w1").toTensor().scalar_type(), torch::kFloat64);
  head->eval();
  EXPECT_FALSE(head->script().is_training());
  // Random data of its kind, and targets of the wrong kind refused naming the head.
  const auto y = random_targets(*head, 5, 2, torch::dtype(torch::kFloat64));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(y.scalar_type(), torch::kLong);
  head->check_targets(y, "y");
  testing::expect_error_mentions([&] { head->check_targets(torch::full({5, 2}, 4, torch::kLong), "y"); },
                                 {"y", "[0, 4)", "4]"});
  testing::expect_error_mentions([&] { values->check_targets(torch::randn({5, 2, 3}), "y"); },
                                 {"y", "[T, B, 2]", "gauss.pt", "[5, 2, 3]"});
}

// The loss the user cares about is the one verified: every exact method's loss, per-step
// losses and gradients equal full BPTT's, with variable lengths (padding nan) under SUM and
// MEAN, and the MEAN is today's: each sequence averaged over its own length, then the batch.
TEST(HeadsScript, EveryExactMethodMatchesFullBpttWithTheUsersLoss) {
  for (bool classes : {true, false}) {
    SCOPED_TRACE(classes ? "categorical" : "gaussian");
    torch::manual_seed(5);
    auto model = make_model({"gru", 4, 3, 1});
    model->to(torch::kFloat64);
    std::shared_ptr<ScriptHead> head =
        classes ? ScriptHead::wrap(make_head_script(kCategorical), "head.pt") : gaussian_head();
    head->to(torch::kFloat64);
    const int64_t T = 13, B = 3;
    SequenceBatch batch;
    batch.lengths = torch::tensor({13, 5, 1}, torch::kLong);
    const auto padding = torch::arange(T).unsqueeze(1) >= batch.lengths;  // [T, B]
    batch.inputs = torch::randn({T, B, 4}, torch::kFloat64)
                       .masked_fill(padding.unsqueeze(-1), NAN)
                       .requires_grad_(true);
    batch.targets = random_targets(*head, T, B, torch::dtype(torch::kFloat64));
    batch.targets = classes ? batch.targets.masked_fill(padding, -1)
                            : batch.targets.masked_fill(padding.unsqueeze(-1), NAN);
    std::vector<std::string> specs = {"vlrnn:block_length=1", "vlrnn:block_length=4", "checkpoint:segments=3"};
    for (const auto& name : method_names()) {
      if (!handles_left_to_right(name)) continue;  // bivlrnn takes bidirectional models
      if (name != "full" && make_method(name)->is_exact()) specs.push_back(name);
    }
    for (auto reduction : {Reduction::kSum, Reduction::kMean}) {
      verify::VerifyModelOptions options;
      options.reduction = reduction;
      options.h0 = State{torch::randn({1, B, 3}, torch::kFloat64).requires_grad_(true)};
      const auto rows = verify::verify_model(*model, *head, batch, specs, options);
      for (const auto& row : rows) {
        EXPECT_TRUE(row.passed) << row.spec.method << ": " << row.error << " " << row.diff.worst
                                << " rel " << row.diff.max_rel;
        EXPECT_LE(row.diff.max_rel, 1e-10) << row.spec.method;
      }
    }
    // MEAN by hand from the head's own per-step losses: sum over each sequence's valid
    // steps / its length, averaged over the batch.
    auto method = make_method("full");
    const auto result = method->compute(Workload{*model, *head, batch, {}, Reduction::kMean});
    const auto l = result.step_losses.detach();  // [T, B]
    const auto valid = ~padding;
    const auto per_sequence = torch::where(valid, l, torch::zeros_like(l)).sum(0) /
                              batch.lengths.to(torch::kFloat64);
    EXPECT_NEAR(result.loss.item<double>(), per_sequence.mean().item<double>(), 1e-12);
    EXPECT_GT(std::abs(result.loss.item<double>()), 0.0);
  }
}

// NOTE [ Steps without a target ]: a sparse ScriptHead gives the script 0 for the marker and
// scores that step 0, with no gradient; the script never sees -1 or NaN.
TEST(HeadsScript, StepsWithoutATargetScoreZeroAndPassNoGradient) {
  auto classes = ScriptHead::wrap(make_head_script(kCategorical), "head.pt", /*sparse=*/true);
  auto z = torch::randn({2, 2, 3}, torch::requires_grad());
  auto y = torch::tensor({{1, -1}, {-1, 3}}, torch::kLong);
  classes->check_targets(y, "y");
  auto loss = classes->forward(z, y);  // [2, 2]
  EXPECT_EQ(loss[0][1].item<double>(), 0.0);
  EXPECT_EQ(loss[1][0].item<double>(), 0.0);
  EXPECT_GT(loss[0][0].item<double>(), 0.0);
  loss.sum().backward();
  EXPECT_EQ(z.grad()[0][1].abs().sum().item<double>(), 0.0);
  EXPECT_GT(z.grad()[0][0].abs().sum().item<double>(), 0.0);

  auto values = gaussian_head(/*sparse=*/true);
  auto z2 = torch::randn({2, 2, 3}, torch::requires_grad());
  auto y2 = torch::randn({2, 2, 2});
  y2[1][1][0] = NAN;  // a step with any NaN has no target
  auto loss2 = values->forward(z2, y2);
  EXPECT_TRUE(torch::isfinite(loss2).all().item<bool>());
  EXPECT_EQ(loss2[1][1].item<double>(), 0.0);
  loss2.sum().backward();
  EXPECT_TRUE(torch::isfinite(z2.grad()).all().item<bool>());
  EXPECT_EQ(z2.grad()[1][1].abs().sum().item<double>(), 0.0);
  // Without sparse_targets the markers are an error, not a silently unscored step.
  auto strict = ScriptHead::wrap(make_head_script(kCategorical), "head.pt");
  testing::expect_error_mentions([&] { strict->check_targets(y, "y"); }, {"y", "[0, 4)", "-1"});
}

TEST(HeadsScript, NamesWhatAModuleLacks) {
  using testing::expect_error_mentions;
  expect_error_mentions([] { ScriptHead::wrap(make_head_script(""), "head.pt"); },
                        {"head.pt", "expected a method forward(self, z: Tensor, y: Tensor)",
                         "found none"});
  expect_error_mentions([] { ScriptHead::wrap(make_head_script(kCategorical, true, false), "head.pt"); },
                        {"head.pt", "int attribute input_size", "found none"});
  expect_error_mentions(
      [] { ScriptHead::wrap(make_head_script(kCategorical, true, true, false), "head.pt"); },
      {"head.pt", "exactly one int attribute", "num_classes", "target_size", "found neither"});
  expect_error_mentions(
      [] { ScriptHead::wrap(make_head_script(kCategorical, true, true, true, true), "head.pt"); },
      {"head.pt", "exactly one int attribute", "found both"});
}

TEST(HeadsScript, NamesAWrongSignatureOrALossThatIsNotPerStep) {
  using testing::expect_error_mentions;
  auto wrap = [](const std::string& forward) {
    ScriptHead::wrap(make_head_script(forward), "head.pt");
  };
  expect_error_mentions([&] { wrap("def forward(self, z: Tensor) -> Tensor:\n    return z.sum(-1)\n"); },
                        {"head.pt", "2 arguments", "found forward(", "(1)"});
  // Reduced to a scalar: the engine needs one loss per step.
  expect_error_mentions(
      [&] {
        wrap(R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    return torch.matmul(z, self.w1).pow(2).mean()
)");
      },
      {"head.pt", "forward(z [3, 2, 3], y [3, 2] Long)", "shape [T, B] = [3, 2]", "found []"});
  // [T, B] but a running sum over steps: loss[t] depends on earlier steps.
  expect_error_mentions(
      [&] {
        wrap(R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    return torch.matmul(z, self.w1).pow(2).sum(-1).cumsum(0)
)");
      },
      {"head.pt", "depend on z[t, b] and y[t, b] alone", "must not reduce or mix steps"});
  // Not finite on a padded step (z = 0): log(0).
  expect_error_mentions(
      [&] {
        wrap(R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    return -torch.log(z.abs().sum(-1))
)");
      },
      {"head.pt", "forward(z = 0, y = 0)", "expected a finite loss", "padded steps"});
  // A call that fails in the script names the head and what y was.
  expect_error_mentions(
      [&] {
        wrap(R"(
def forward(self, z: Tensor, y: Tensor) -> Tensor:
    return (z - y).sum(-1)
)");
      },
      {"head.pt", "failed", "class indices [T, B] int64 in [0, 4)"});
}

}  // namespace
}  // namespace vlrnn
