// A scripted stock torch.nn.LSTM / GRU / RNN as a model file (NOTE [ Stock recurrent
// modules in a model file ] in vlrnn/core/stock_rnn_script.h). The modules are scripted by
// Python's torch exactly as a user does (torch.jit.script(nn.LSTM(...)).save(path)); the
// tests skip, saying so, where no python3 can import torch.
// Shapes: T = steps, B = batch, F = input, H = hidden, L = layers.
#include "test_util.h"

#include "vlrnn/registry/bidirectional.h"
#include "vlrnn/core/script_model.h"
#include "vlrnn/verify/verify_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace vlrnn {
namespace {

namespace fs = std::filesystem;
namespace rnn_utils = torch::nn::utils::rnn;

// A python3 that imports torch (Debian's python3-torch serves /usr/bin/python3), or "";
// looked for once per process (importing torch takes seconds).
const std::string& python_with_torch() {
  static const std::string found = [] {
    for (const std::string candidate : {"/usr/bin/python3", "python3"}) {
      if (std::system((candidate + " -c 'import torch' > /dev/null 2>&1").c_str()) == 0) {
        return candidate;
      }
    }
    return std::string();
  }();
  return found;
}

// Saves `modules` (file name -> Python expression of an nn.Module) scripted into a fresh
// folder, in one Python run (importing torch takes seconds); "" without Python's torch.
std::string export_modules(const std::map<std::string, std::string>& modules) {
  const auto& python = python_with_torch();
  if (python.empty()) return "";
  static int calls = 0;
  const auto dir = fs::temp_directory_path() /
                   ("vlrnn_stock_" + std::to_string(::getpid()) + "_" + std::to_string(calls++));
  fs::create_directories(dir);
  std::ofstream script(dir / "export.py");
  script << "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n";
  for (const auto& [file, expression] : modules) {
    script << "torch.jit.script(" << expression << ").save('" << (dir / file).string() << "')\n";
  }
  script.close();
  const auto command = python + " " + (dir / "export.py").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return dir.string();
}

#define EXPORT_OR_SKIP(dir, ...)                                              \
  const std::string dir = export_modules(__VA_ARGS__);                        \
  if (dir.empty()) GTEST_SKIP() << "no python3 can import torch (python3-torch)"

// A batch of B = 3 sequences of T = 11 steps, F = 5; padding is nan so any read of it shows.
SequenceBatch make_batch(bool variable) {
  SequenceBatch batch;
  batch.inputs = torch::randn({11, 3, 5}, torch::kFloat64);  // [T, B, F]
  batch.targets = torch::randint(0, 2, {11, 3});              // [T, B]
  if (variable) {
    batch.lengths = torch::tensor({4, 11, 1}, torch::kLong);
    auto padded = torch::arange(11).unsqueeze(1) >= batch.lengths.unsqueeze(0);  // [T, B]
    batch.inputs.masked_fill_(padded.unsqueeze(-1), NAN);
  }
  batch.inputs.requires_grad_(true);
  return batch;
}

TEST(StockScriptModel, LstmGradientsEqualLibTorchsLstmAndItTrains) {
  EXPORT_OR_SKIP(dir, {{"lstm.pt", "nn.LSTM(5, 4, num_layers=2, batch_first=True)"}});
  torch::manual_seed(5);
  auto model = ScriptModel::load(dir + "/lstm.pt");
  ASSERT_TRUE(model->is_stock());
  EXPECT_EQ(model->input_size(), 5);
  EXPECT_EQ(model->output_size(), 4);
  ASSERT_EQ(model->state_spec().size(), 2u);  // (h, c): [L, B, H], batch at dim 1
  EXPECT_EQ(model->state_spec()[1].shape, (std::vector<int64_t>{2, -1, 4}));
  EXPECT_EQ(model->state_spec()[1].batch_dim, 1);
  model->to(torch::kFloat64);
  auto head = make_head("ce", 4, 2);
  head->to(torch::kFloat64);

  // LibTorch's own LSTM, time first, with the file's weights (the same names).
  torch::nn::LSTM reference(torch::nn::LSTMOptions(5, 4).num_layers(2));
  reference->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : reference->named_parameters()) {
      p.value().copy_(model->script().attr(p.key()).toTensor());
    }
  }
  for (const bool variable : {false, true}) {
    const auto batch = make_batch(variable);
    const auto h0 = torch::randn({2, 3, 4}, torch::kFloat64), c0 = torch::randn({2, 3, 4}, torch::kFloat64);
    // The reference: one packed call over the whole sequences, L = Σ w ⊙ l (mean reduction).
    auto x = batch.inputs.detach().clone().requires_grad_(true);
    auto h0_ref = h0.clone().requires_grad_(true), c0_ref = c0.clone().requires_grad_(true);
    const auto lengths = variable ? batch.lengths : torch::full({3}, 11, torch::kLong);
    auto packed = rnn_utils::pack_padded_sequence(x, lengths, /*batch_first=*/false,
                                                  /*enforce_sorted=*/false);
    auto out = std::get<0>(reference->forward_with_packed_input(packed, std::make_tuple(h0_ref, c0_ref)));
    auto z = std::get<0>(rnn_utils::pad_packed_sequence(out, false, 0.0, 11));  // [T, B, H]
    const auto w = step_weights(Reduction::kMean, 0, 11, 11, 3, batch.lengths, z.options());
    reference->zero_grad();
    head->zero_grad();
    (w * head->forward(z, batch.targets)).sum().backward();
    testing::Named ref{{"x", x.grad()}, {"h0", h0_ref.grad()}, {"c0", c0_ref.grad()}};
    for (const auto& p : reference->named_parameters()) ref[p.key()] = p.value().grad().clone();
    for (const auto& p : head->named_parameters()) ref["head " + p.key()] = p.value().grad().clone();

    for (const std::string spec : {"full", "vlrnn:block_length=3", "checkpoint:segments=4"}) {
      auto batch_copy = batch;
      batch_copy.inputs = batch.inputs.detach().clone().requires_grad_(true);
      const State h0_state{h0.clone().requires_grad_(true), c0.clone().requires_grad_(true)};
      model->zero_grad();
      head->zero_grad();
      make_method_from_spec(spec)->compute({*model, *head, batch_copy, h0_state, Reduction::kMean});
      testing::Named got{{"x", batch_copy.inputs.grad()}, {"h0", h0_state[0].grad()},
                         {"c0", h0_state[1].grad()}};
      for (const auto& p : model->named_parameters()) got[p.key()] = p.value().grad();
      for (const auto& p : head->named_parameters()) got["head " + p.key()] = p.value().grad();
      // Padded steps of x (nan) get a zero gradient in both: a nan would fail the comparison.
      testing::expect_close(got, ref, 1e-10,
                            spec + (variable ? " variable lengths" : " fixed lengths"));
    }
  }

  // It trains: a few SGD steps with VLRNN's gradients lower the loss on one batch.
  model->to(torch::kFloat32);
  head->to(torch::kFloat32);
  SequenceBatch batch = make_batch(true);
  batch.inputs = batch.inputs.detach().to(torch::kFloat32);
  batch.targets = (batch.inputs.select(2, 0) > 0).to(torch::kLong);  // [T, B]: learnable
  std::vector<torch::Tensor> params = model->parameters();
  for (const auto& p : head->parameters()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(0.5));
  auto method = make_method_from_spec("vlrnn:block_length=4");
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 30; ++step) {
    sgd.zero_grad();
    last = method->compute({*model, *head, batch}).loss.item<double>();
    if (step == 0) first = last;
    sgd.step();
  }
  std::cout << "[ trains   ] loss " << first << " -> " << last << " in 30 SGD steps\n";
  EXPECT_LT(last, 0.8 * first) << "loss " << first << " -> " << last;
  fs::remove_all(dir);
}

TEST(StockScriptModel, EveryExactMethodOnGruAndRnnEitherLayout) {
  EXPORT_OR_SKIP(dir, {{"gru.pt", "nn.GRU(5, 4, num_layers=2)"},
                       {"rnn.pt", "nn.RNN(5, 4, num_layers=3, nonlinearity='relu', batch_first=True)"}});
  for (const std::string file : {"gru.pt", "rnn.pt"}) {
    torch::manual_seed(3);
    auto model = ScriptModel::load(dir + "/" + file);
    ASSERT_TRUE(model->is_stock());
    ASSERT_EQ(model->state_spec().size(), 1u);  // (h [L, B, H])
    model->to(torch::kFloat64);
    auto head = make_head("ce", model->output_size(), 2);
    head->to(torch::kFloat64);
    std::vector<std::string> specs = {"vlrnn:block_length=1", "vlrnn:block_length=4", "checkpoint:segments=3"};
    for (const auto& name : method_names()) {
      if (!handles_left_to_right(name)) continue;  // bivlrnn takes bidirectional models
      if (name != "full" && make_method(name)->is_exact()) specs.push_back(name);
    }
    for (const bool variable : {false, true}) {
      const auto rows = verify::verify_model(*model, *head, make_batch(variable), specs);
      ASSERT_EQ(rows.size(), specs.size());
      for (const auto& row : rows) {
        EXPECT_TRUE(row.passed) << file << (variable ? " variable " : " fixed ")
                                << row.spec.method << ": " << row.error << " rel "
                                << row.diff.max_rel;
      }
    }
  }
  fs::remove_all(dir);
}

TEST(StockScriptModel, RejectsWhatItCannotRunAndReportsPerCallDropout) {
  EXPORT_OR_SKIP(dir, {{"bi.pt", "nn.LSTM(5, 4, bidirectional=True)"},
                       {"proj.pt", "nn.LSTM(5, 4, proj_size=2)"},
                       {"drop.pt", "nn.LSTM(5, 4, num_layers=3, dropout=0.5)"}});
  testing::expect_error_mentions([&] { ScriptModel::load(dir + "/bi.pt"); },
                                 {"bi.pt", "nn.LSTM(F=5, H=4", "bidirectional=True is not supported",
                                  "found bidirectional=True"});
  testing::expect_error_mentions([&] { ScriptModel::load(dir + "/proj.pt"); },
                                 {"proj.pt", "expected proj_size=0", "found proj_size=2"});
  // Dropout between layers is drawn once per forward__0 call, a [t, B, H] mask for each
  // layer in turn: cut into blocks, the draws come in another order, so block methods
  // cannot be exact, and the verifier says why.
  torch::manual_seed(3);
  auto model = ScriptModel::load(dir + "/drop.pt");
  model->to(torch::kFloat64);
  model->train(true);
  auto head = make_head("ce", 4, 2);
  head->to(torch::kFloat64);
  const auto rows = verify::verify_model(*model, *head, make_batch(true), {"vlrnn:block_length=4"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].passed);
  EXPECT_NE(rows[0].diagnosis.find("depend on where the sequence is cut"), std::string::npos)
      << rows[0].diagnosis;
  // In eval mode there are no draws, and it is exact.
  model->eval();
  EXPECT_TRUE(verify::verify_model(*model, *head, make_batch(true), {"vlrnn:block_length=4"})[0].passed);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vlrnn
