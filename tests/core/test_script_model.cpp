// ScriptModel: a TorchScript module as a RecurrentModule. The modules are written here in
// TorchScript source (torch::jit::Module::define), so no Python is needed; each broken one
// must fail on wrap() with an error naming what was expected and what was found.
// Shapes: T = steps, B = batch, F = H = 3.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/core/script_model.h"
#include "vlrnn/verify/verify_model.h"

#include <ATen/record_function.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include <sstream>
#include <vector>

namespace vlrnn {
namespace {

const std::string kInitialState = R"(
def initial_state(self, batch: int) -> Tuple[Tensor]:
    return (torch.zeros(batch, 3),)
)";

// A tanh RNN honouring lengths: h_t = tanh(x_t W + u * h_{t-1}).
const std::string kForward = R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    h = state[0]
    zs = []
    for t in range(x.size(0)):
        valid = (lengths > t).unsqueeze(1)
        x_t = torch.where(valid, x[t], torch.zeros_like(x[t]))
        h_new = torch.tanh(torch.matmul(x_t, self.w) + self.u * h)
        h = torch.where(valid, h_new, h)
        zs.append(torch.where(valid, h_new, torch.zeros_like(h_new)))
    return torch.stack(zs), (h,)
)";

torch::jit::Module make_script(const std::string& forward, bool with_input_size = true,
                               const std::string& initial_state = kInitialState) {
  torch::jit::Module m("Cell");
  m.register_attribute("training", c10::BoolType::get(), true);  // as Python's modules have
  m.register_parameter("w", torch::randn({3, 3}).requires_grad_(true), /*is_buffer=*/false);
  m.register_parameter("u", torch::rand({3}).requires_grad_(true), /*is_buffer=*/false);
  if (with_input_size) m.register_attribute("input_size", c10::IntType::get(), int64_t(3));
  if (!initial_state.empty()) m.define(initial_state);
  if (!forward.empty()) m.define(forward);
  return m;
}

TEST(ScriptModel, FindsSizesStateLayoutAndParameters) {
  auto model = ScriptModel::wrap(make_script(kForward), "test cell");
  EXPECT_EQ(model->input_size(), 3);
  EXPECT_EQ(model->output_size(), 3);
  ASSERT_EQ(model->state_spec().size(), 1u);
  EXPECT_EQ(model->state_spec()[0].shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(model->state_spec()[0].batch_dim, 0);
  // The script module's own tensors: a gradient lands in both.
  ASSERT_EQ(model->parameters().size(), 2u);
  EXPECT_TRUE(model->parameters()[0].is_same(model->script().attr("w").toTensor()));
  model->to(torch::kFloat64);
  EXPECT_EQ(model->script().attr("w").toTensor().scalar_type(), torch::kFloat64);
  model->eval();
  EXPECT_FALSE(model->script().is_training());
}

TEST(ScriptModel, EveryExactMethodMatchesFullBptt) {
  torch::manual_seed(3);
  auto model = ScriptModel::wrap(make_script(kForward), "test cell");
  model->to(torch::kFloat64);
  auto head = make_head("ce", model->output_size(), 2);
  head->to(torch::kFloat64);
  SequenceBatch batch;
  batch.inputs = torch::randn({11, 3, 3}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
  batch.targets = torch::randint(0, 2, {11, 3});
  batch.lengths = torch::tensor({11, 4, 1}, torch::kLong);
  std::vector<std::string> specs = {"vlrnn:block_length=1", "vlrnn:block_length=4", "checkpoint:segments=3"};
  for (const auto& name : method_names()) {
    if (!handles_left_to_right(name)) continue;  // bivlrnn takes bidirectional models
    if (name != "full" && make_method(name)->is_exact()) specs.push_back(name);
  }
  const auto rows = verify::verify_model(*model, *head, batch, specs);
  for (const auto& row : rows) {
    EXPECT_TRUE(row.passed) << row.spec.method << ": " << row.error << " " << row.diff.worst
                            << " rel " << row.diff.max_rel;
  }
}

// What the executor's optimize switch said on this thread each time an aten::tanh ran (the
// script's only one), recorded by a thread-local RecordFunction callback.
std::vector<bool>& optimize_at_tanh() {
  static std::vector<bool> seen;
  return seen;
}

std::unique_ptr<at::ObserverContext> record_optimize_at_tanh(const at::RecordFunction& op) {
  if (std::string(op.name()) == "aten::tanh") {
    optimize_at_tanh().push_back(torch::jit::getGraphExecutorOptimize());
  }
  return nullptr;
}

// NOTE [ Script calls on the CPU run unspecialised ]: each of our calls of the script on the
// CPU runs with the executor's optimisation off, and leaves the thread's switch as it was.
// The same module called directly, the control, runs with it on.
TEST(ScriptModel, RunsItsScriptUnspecialisedOnTheCpu) {
  auto model = ScriptModel::wrap(make_script(kForward), "test cell");
  const auto x = torch::randn({2, 2, 3});  // [T, B, F]: two steps, so two tanh a call
  const auto lengths = torch::tensor({2, 2}, torch::kLong);
  const auto h0 = model->initial_state(2, torch::TensorOptions().dtype(torch::kFloat32));
  struct Recording {  // removed however the test ends: the suite's next cases share the thread
    at::CallbackHandle handle;
    ~Recording() { at::removeCallback(handle); }
  } recording{at::addThreadLocalCallback(
      at::RecordFunctionCallback(record_optimize_at_tanh).scopes({at::RecordScope::FUNCTION}))};
  optimize_at_tanh().clear();
  auto script = model->script();  // a handle on the same module
  script.forward({x, c10::ivalue::Tuple::create({h0.tensors()[0]}), lengths});
  const auto direct = optimize_at_tanh();
  optimize_at_tanh().clear();
  for (int call = 0; call < 3; ++call) {
    auto [z, exit] = model->forward(x, h0, lengths);
    z.sum().backward();
  }
  const auto ours = optimize_at_tanh();
  EXPECT_EQ(direct, std::vector<bool>(2, true));
  EXPECT_EQ(ours, std::vector<bool>(6, false));
  EXPECT_TRUE(torch::jit::getGraphExecutorOptimize());
}

TEST(ScriptModel, NamesWhatAModuleLacks) {
  using testing::expect_error_mentions;
  expect_error_mentions([] { ScriptModel::wrap(make_script(""), "cell.pt"); },
                        {"cell.pt", "expected a method forward(self, x: Tensor", "found none",
                         "initial_state"});
  expect_error_mentions([] { ScriptModel::wrap(make_script(kForward, false), "cell.pt"); },
                        {"cell.pt", "int attribute input_size", "found none"});
  expect_error_mentions([] { ScriptModel::wrap(make_script(kForward, true, ""), "cell.pt"); },
                        {"cell.pt", "initial_state(self, batch: int)", "found none"});
}

TEST(ScriptModel, NamesAWrongSignature) {
  using testing::expect_error_mentions;
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor]) -> Tuple[Tensor, Tuple[Tensor]]:
    return x, state
)"), "cell.pt");
      },
      {"cell.pt", "3 arguments", "found forward(", "(2)"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tensor, lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    return x, (state,)
)"), "cell.pt");
      },
      {"cell.pt", "state argument", "expected Tuple[Tensor, ...]", "found Tensor"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tensor:
    return x
)"), "cell.pt");
      },
      {"cell.pt", "expected to return (z: Tensor, state: Tuple[Tensor, ...])", "found Tensor"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(kForward, true, R"(
def initial_state(self, batch: int) -> Tuple[Tensor]:
    return (torch.zeros(3, 3),)
)"), "cell.pt");
      },
      {"cell.pt", "batch in exactly one dimension", "[3, 3] for batch 2"});
}

TEST(ScriptModel, NamesAWrongOutputOrIgnoredLengths) {
  using testing::expect_error_mentions;
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    return x.transpose(0, 1)[0], state
)"), "cell.pt");
      },
      {"cell.pt", "expected z of shape [T, B, H] = [3, 2, H]", "found [3, 3]"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    return torch.tanh(x), (torch.cat([state[0], state[0]], 1),)
)"), "cell.pt");
      },
      {"cell.pt", "returned state tensor 0", "expected the entry's shape [2, 3]", "found [2, 6]"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    return torch.tanh(x) + 1.0, state
)"), "cell.pt");
      },
      {"cell.pt", "expected z zero past each sequence's end", "honour lengths"});
  expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    valid = (lengths > 0).unsqueeze(1)
    z = torch.where(torch.arange(x.size(0)).unsqueeze(1).unsqueeze(2) < lengths.unsqueeze(1).unsqueeze(0), torch.tanh(x), torch.zeros_like(x))
    return z, (state[0] * 2.0,)
)"), "cell.pt");
      },
      {"cell.pt", "no valid step", "keep its entry state", "state tensor 0 changed"});
}

TEST(ScriptModel, AnErrorInsideTheModelNamesTheCallAndTheLayoutNotATraceback) {
  // A model written batch first ([B, T, F]) given the probe's time-first x [3, 2, 3]:
  // x[:, t] is [3, 3] against a state of 2 rows, and TorchScript's add fails inside it.
  const auto batch_first = make_script(R"(
def forward(self, x: Tensor, state: Tuple[Tensor], lengths: Tensor) -> Tuple[Tensor, Tuple[Tensor]]:
    h = state[0]
    zs = []
    for t in range(x.size(1)):
        h = torch.tanh(torch.matmul(x[:, t], self.w) + self.u * h)
        zs.append(h)
    return torch.stack(zs, 1), (h,)
)");
  std::string message;
  try {
    ScriptModel::wrap(batch_first, "model file \"bf.pt\"");
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
  }
  for (const std::string fragment :
       {"model file \"bf.pt\"", "forward(x [3, 2, 3], state, lengths [3, 1])",
        "raised an error in the load-time probe", "x laid out [T, B, F], time first",
        "T = 3 steps, B = 2 sequences, F = 3 features", "transpose",
        "RuntimeError: The size of tensor a (3) must match the size of tensor b (2)"}) {
    EXPECT_NE(message.find(fragment), std::string::npos) << "lacks \"" << fragment << "\":\n"
                                                         << message;
  }
  // One line of TorchScript's error, not its traceback.
  EXPECT_EQ(message.find("Traceback"), std::string::npos) << message;
  EXPECT_EQ(message.find("The following operation failed"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  testing::expect_error_mentions(
      [] {
        ScriptModel::wrap(make_script(kForward, true, R"(
def initial_state(self, batch: int) -> Tuple[Tensor]:
    return (torch.zeros(batch, 3) + torch.zeros(2, 3),)
)"), "cell.pt");
      },
      {"cell.pt", "initial_state(3) raised an error in the load-time probe",
       "expected the zero state of 3 sequences", "must match the size"});
}

TEST(ScriptModel, LoadNamesTheFile) {
  testing::expect_error_mentions([] { ScriptModel::load("/nonexistent/cell.pt"); },
                                 {"model file \"/nonexistent/cell.pt\"", "cannot read"});
}

}  // namespace
}  // namespace vlrnn
