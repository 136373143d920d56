#include "test_util.h"

#include "vlrnn/cells/gru_layer.h"
#include "vlrnn/cells/gru_reference.h"
#include "vlrnn/cells/gru_block.h"
#include "vlrnn/verify/compare.h"

#include <cmath>
#include <iostream>
#include <functional>
#include <map>

// Shapes: Tb = steps, B = batch, F = input features, H = hidden (vlrnn/core/shapes.h).

namespace vlrnn {

// For GoogleTest's parameter printing.
inline void PrintTo(GruVariant variant, std::ostream* out) { *out << to_string(variant); }

namespace {

using testing::expect_error_mentions;

using testing::expect_close;
using testing::Named;
using testing::rel_diff;

// Everything one block produces: outputs and the gradient of every input.
struct Problem {
  torch::Tensor x, h0, mask, seed_z, seed_h;  // [Tb, B, F], [1, B, H], [Tb, B], [Tb, B, H], [1, B, H]
  GruWeights w;

  Problem(torch::ScalarType dtype, std::vector<int64_t> lengths = {}, int64_t steps = 7,
          int64_t batch = 4, int64_t input = 3, int64_t hidden = 5, uint64_t seed = 11) {
    torch::manual_seed(seed);
    const auto o = torch::dtype(dtype);
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    w = {torch::empty({3 * hidden, input}, o).uniform_(-bound, bound),
         torch::empty({3 * hidden, hidden}, o).uniform_(-bound, bound),
         torch::empty({3 * hidden}, o).uniform_(-bound, bound),
         torch::empty({3 * hidden}, o).uniform_(-bound, bound)};
    x = torch::randn({steps, batch, input}, o);
    h0 = torch::randn({1, batch, hidden}, o);
    if (!lengths.empty()) mask = step_mask(torch::tensor(lengths), steps, torch::kCPU);
    seed_z = torch::randn({steps, batch, hidden}, o);
    seed_h = torch::randn({1, batch, hidden}, o);
  }
};

using BlockFn = std::function<std::pair<torch::Tensor, torch::Tensor>(
    GruVariant, const torch::Tensor&, const torch::Tensor&, const GruWeights&,
    const torch::Tensor&)>;

// Runs `fn` on fresh leaves of `p` and back-propagates L = Σ z ⊙ seed_z + Σ h_exit ⊙ seed_h.
Named run_gru(const BlockFn& fn, GruVariant variant, const Problem& p) {
  auto leaf = [](const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); };
  auto x = leaf(p.x), h0 = leaf(p.h0);
  GruWeights w{leaf(p.w.w_ih), leaf(p.w.w_hh), leaf(p.w.b_ih), leaf(p.w.b_hh)};
  auto [z, h] = fn(variant, x, h0, w, p.mask);
  ((z * p.seed_z).sum() + (h * p.seed_h).sum()).backward();
  return {{"z", z.detach()},          {"h_exit", h.detach()},      {"grad x", x.grad()},
          {"grad h0", h0.grad()},     {"grad w_ih", w.w_ih.grad()}, {"grad w_hh", w.w_hh.grad()},
          {"grad b_ih", w.b_ih.grad()}, {"grad b_hh", w.b_hh.grad()}};
}

const BlockFn kHandWritten = [](GruVariant v, const torch::Tensor& x, const torch::Tensor& h0,
                                const GruWeights& w, const torch::Tensor& mask) {
  return gru_layer(v, x, h0, w, mask);
};
const BlockFn kReference = [](GruVariant v, const torch::Tensor& x, const torch::Tensor& h0,
                              const GruWeights& w, const torch::Tensor& mask) {
  return gru_block_reference(v, x, h0, w, mask);
};

// ---- hand-written backward == autograd of the same formula ----------------------------------

struct GruCase {
  GruVariant variant;
  torch::ScalarType dtype;
  bool variable_lengths;
};

class GruVariantGradients : public ::testing::TestWithParam<GruCase> {};

TEST_P(GruVariantGradients, EqualAutogradOfTheSameFormula) {
  const auto c = GetParam();
  // Lengths: full, none, partial, one short of full.
  const Problem p(c.dtype, c.variable_lengths ? std::vector<int64_t>{7, 0, 3, 6}
                                              : std::vector<int64_t>{});
  expect_close(run_gru(kHandWritten, c.variant, p), run_gru(kReference, c.variant, p),
               verify::tolerance_for(c.dtype),
               "GRU " + to_string(c.variant) + (c.dtype == torch::kFloat64 ? " f64" : " f32") +
                   (c.variable_lengths ? " lengths" : " full") + " vs autograd");
}

std::vector<GruCase> all_cases() {
  std::vector<GruCase> cases;
  for (auto v : all_gru_variants()) {
    for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
      for (bool lengths : {false, true}) cases.push_back({v, dtype, lengths});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Variants, GruVariantGradients, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return to_string(info.param.variant) +
                                  (info.param.dtype == torch::kFloat64 ? "_f64" : "_f32") +
                                  (info.param.variable_lengths ? "_lengths" : "_full");
                         });

TEST(GruVariants, OneStepBlocksAndABatchOfOneWork) {
  for (auto v : all_gru_variants()) {
    const Problem p(torch::kFloat64, {}, /*steps=*/1, /*batch=*/1);
    expect_close(run_gru(kHandWritten, v, p), run_gru(kReference, v, p), 1e-10,
                 "GRU " + to_string(v) + " f64 Tb = B = 1 vs autograd");
  }
}

// ---- v3 and v4 are LibTorch's GRU; v1 and v2 are one function, a different one ------------

class LibTorchGru : public ::testing::TestWithParam<std::tuple<GruVariant, torch::ScalarType>> {};

TEST_P(LibTorchGru, V3AndV4EqualTorchNnGruWithTheSameWeights) {
  const auto [variant, dtype] = GetParam();
  torch::manual_seed(5);
  torch::nn::GRU gru(torch::nn::GRUOptions(3, 6));
  gru->to(dtype);
  GruBlock block(variant, 3, 6);
  block.to(dtype);
  block.copy_weights_from(gru);
  const auto x = torch::randn({9, 4, 3}, torch::dtype(dtype));     // [Tb, B, F]
  const auto h0 = torch::randn({1, 4, 6}, torch::dtype(dtype));    // [1, B, H]
  const auto seed_z = torch::randn({9, 4, 6}, torch::dtype(dtype));
  const auto seed_h = torch::randn({1, 4, 6}, torch::dtype(dtype));
  auto run_one = [&](auto&& forward, const std::vector<torch::Tensor>& params) {
    auto xl = x.clone().requires_grad_(true), hl = h0.clone().requires_grad_(true);
    auto [z, h] = forward(xl, hl);
    ((z * seed_z).sum() + (h * seed_h).sum()).backward();
    Named out{{"z", z.detach()}, {"h_exit", h.detach()}, {"grad x", xl.grad()}, {"grad h0", hl.grad()}};
    const char* names[] = {"grad w_ih", "grad w_hh", "grad b_ih", "grad b_hh"};
    for (size_t i = 0; i < 4; ++i) out[names[i]] = params[i].grad().clone();
    return out;
  };
  auto gp = gru->named_parameters();
  const auto ref = run_one(
      [&](const torch::Tensor& xl, const torch::Tensor& hl) {
        auto [z, h] = gru->forward(xl, hl);
        return std::make_pair(z, h);
      },
      {gp["weight_ih_l0"], gp["weight_hh_l0"], gp["bias_ih_l0"], gp["bias_hh_l0"]});
  const auto w = block.weights();
  const auto got = run_one(
      [&](const torch::Tensor& xl, const torch::Tensor& hl) {
        auto [z, h] = block.forward(xl, State{hl});
        return std::make_pair(z, h[0]);
      },
      {w.w_ih, w.w_hh, w.b_ih, w.b_hh});
  expect_close(got, ref, verify::tolerance_for(dtype),
               "GRU " + to_string(variant) + (dtype == torch::kFloat64 ? " f64" : " f32") +
                   " vs torch::nn::GRU");
}

INSTANTIATE_TEST_SUITE_P(V3V4, LibTorchGru,
                         ::testing::Combine(::testing::Values(GruVariant::kV3, GruVariant::kV4),
                                            ::testing::Values(torch::kFloat64, torch::kFloat32)));

TEST(GruVariants, V1AndV2AreOneFunctionAndDifferFromV3) {
  const Problem p(torch::kFloat64, {7, 2, 5, 7});
  const auto v1 = run_gru(kHandWritten, GruVariant::kV1, p);
  expect_close(run_gru(kHandWritten, GruVariant::kV2, p), v1, 1e-10, "v2 vs v1");
  // The reset gate's place matters: v3 is another function of the same weights (so the
  // comparisons above could fail).
  EXPECT_GT(rel_diff(run_gru(kHandWritten, GruVariant::kV3, p).at("z"), v1.at("z")), 1e-3);
}

TEST(GruVariants, V3AndV4ComputeTheSameForward) {
  const Problem p(torch::kFloat64);
  const auto v3 = run_gru(kHandWritten, GruVariant::kV3, p);
  expect_close(run_gru(kHandWritten, GruVariant::kV4, p), v3, 1e-12, "v4 vs v3");
}

// ---- variable lengths: a batch equals each sequence run alone ------------------------------

class GruVariantLengths : public ::testing::TestWithParam<GruVariant> {};

TEST_P(GruVariantLengths, BatchEqualsEachSequenceAlone) {
  torch::manual_seed(21);
  GruBlock model(GetParam(), 3, 5);
  model.to(torch::kFloat64);
  const std::vector<int64_t> lengths{6, 0, 2, 4, 6};
  const int64_t steps = 6, batch = 5;
  const auto o = torch::dtype(torch::kFloat64);
  const auto x = torch::randn({steps, batch, 3}, o);    // [Tb, B, F]
  const auto h0 = torch::randn({1, batch, 5}, o);       // [1, B, H]
  const auto seed_z = torch::randn({steps, batch, 5}, o);
  const auto seed_h = torch::randn({1, batch, 5}, o);

  // The batch, with lengths.
  model.zero_grad();
  auto xb = x.clone().requires_grad_(true), hb = h0.clone().requires_grad_(true);
  auto [z, h] = model.forward(xb, State{hb}, torch::tensor(lengths));
  ((z * seed_z).sum() + (h[0] * seed_h).sum()).backward();
  std::vector<torch::Tensor> batch_param_grads;
  for (const auto& prm : model.parameters()) batch_param_grads.push_back(prm.grad().clone());

  // Each sequence alone, over its own steps only; parameter gradients summed.
  model.zero_grad();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[b];
    auto hs = h0.narrow(1, b, 1).clone().requires_grad_(true);  // [1, 1, H]
    if (len == 0) {
      // 0 valid steps: z is zero, the state passes through untouched.
      EXPECT_EQ(z.narrow(1, b, 1).abs().max().item<double>(), 0.0);
      EXPECT_TRUE(torch::equal(h[0].narrow(1, b, 1), hs));
      EXPECT_TRUE(torch::equal(hb.grad().narrow(1, b, 1), seed_h.narrow(1, b, 1)));
      EXPECT_EQ(xb.grad().narrow(1, b, 1).abs().max().item<double>(), 0.0);
      continue;
    }
    auto xs = x.narrow(0, 0, len).narrow(1, b, 1).clone().requires_grad_(true);  // [len, 1, F]
    auto [zs, hs_exit] = model.forward(xs, State{hs});
    ((zs * seed_z.narrow(0, 0, len).narrow(1, b, 1)).sum() +
     (hs_exit[0] * seed_h.narrow(1, b, 1)).sum())
        .backward();
    const auto zb = z.narrow(1, b, 1);
    EXPECT_LE(rel_diff(zb.narrow(0, 0, len), zs), 1e-12) << "z of sequence " << b;
    if (len < steps) {
      EXPECT_EQ(zb.narrow(0, len, steps - len).abs().max().item<double>(), 0.0)
          << "z past the end of sequence " << b;
      EXPECT_EQ(xb.grad().narrow(1, b, 1).narrow(0, len, steps - len).abs().max().item<double>(), 0.0)
          << "dx past the end of sequence " << b;
    }
    EXPECT_LE(rel_diff(h[0].narrow(1, b, 1), hs_exit[0]), 1e-12) << "h_exit of sequence " << b;
    EXPECT_LE(rel_diff(hb.grad().narrow(1, b, 1), hs.grad()), 1e-10) << "dh0 of sequence " << b;
    const auto dxb = xb.grad().narrow(1, b, 1);
    EXPECT_LE(rel_diff(dxb.narrow(0, 0, len), xs.grad()), 1e-10) << "dx of sequence " << b;
  }
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_LE(rel_diff(batch_param_grads[i], params[i].grad()), 1e-10) << "parameter " << i;
  }
}

TEST_P(GruVariantLengths, PaddingNeverReachesAnActivationOrGradient) {
  // Padded steps full of nan give the same finite results as zero padding.
  const Problem clean(torch::kFloat64, {5, 1, 7, 0});
  Problem dirty = clean;
  dirty.x = clean.x.masked_fill(clean.mask.logical_not().unsqueeze(2), NAN);
  const auto want = run_gru(kHandWritten, GetParam(), clean);
  const auto got = run_gru(kHandWritten, GetParam(), dirty);
  for (const auto& [name, t] : got) {
    EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
    EXPECT_TRUE(torch::equal(t, want.at(name))) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, GruVariantLengths, ::testing::ValuesIn(all_gru_variants()),
                         [](const auto& info) { return to_string(info.param); });

// ---- under the gradient methods ------------------------------------------------------------

TEST(GruVariants, VlrnnEqualsFullBpttOnAVariableLengthBatch) {
  // The verification matrix runs full-length batches; this adds lengths that end inside,
  // at and before block boundaries (K = 4, T = 11).
  for (auto kind : {"gru_v1", "gru_v2", "gru_v3", "gru_v4"}) {
    torch::manual_seed(8);
    auto model = make_model({kind, 3, 4, 1});
    model->to(torch::kFloat64);
    auto head = make_head("ce", 4, 3);
    head->to(torch::kFloat64);
    SequenceBatch batch;
    batch.inputs = torch::randn({11, 4, 3}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
    batch.targets = torch::randint(0, 3, {11, 4}, torch::kLong);
    batch.lengths = torch::tensor(std::vector<int64_t>{11, 4, 9, 1});
    const State h0{torch::randn({1, 4, 4}, torch::kFloat64).requires_grad_(true)};
    const Workload workload{*model, *head, batch, h0, Reduction::kMean};
    auto full = make_method("full");
    auto vlrnn = make_method_from_spec("vlrnn:block_length=4");
    const auto ref = verify::run_and_snapshot(*full, workload);
    const auto got = verify::run_and_snapshot(*vlrnn, workload);
    const auto diff = verify::compare(got, ref);
    EXPECT_LE(diff.max_rel, 1e-10) << kind << ": worst " << diff.worst;
  }
}

// ---- several layers, dropout between them --------------------------------------------------

using testing::parameters_by_name;
using testing::run_and_backprop;

// x [T, B, F] (NaN-padded past `lengths`), h0 [L, B, H], seeds of L = Σ z ⊙ seed_z + Σ h ⊙ seed_h.
struct LayeredData {
  torch::Tensor x, seed_z, lengths;
  State h0;
  std::vector<torch::Tensor> seed_h;
  LayeredData(torch::ScalarType dtype, int64_t layers, std::vector<int64_t> lens = {}) {
    torch::manual_seed(17);
    const auto o = torch::dtype(dtype);
    x = torch::randn({8, 4, 3}, o);
    seed_z = torch::randn({8, 4, 5}, o);
    h0 = State{torch::randn({layers, 4, 5}, o)};
    seed_h = {torch::randn({layers, 4, 5}, o)};
    if (!lens.empty()) {
      lengths = torch::tensor(lens);
      x = x.masked_fill(step_mask(lengths, 8, torch::kCPU).logical_not().unsqueeze(2), NAN);
    }
  }
  Named run(RecurrentModule& model) const {
    return run_and_backprop(
        [&](const torch::Tensor& xl, const State& h) {
          torch::manual_seed(6);  // the same dropout draws for every model
          return model.forward(xl, h, lengths);
        },
        x, h0, seed_z, seed_h, parameters_by_name(model));
  }
};

std::shared_ptr<RecurrentModule> make_like(const std::string& kind, const RecurrentModule& source,
                                           int64_t layers, double dropout, torch::ScalarType dtype) {
  auto model = make_model({kind, 3, 5, layers, dropout});
  model->to(dtype);
  const auto from = parameters_by_name(source), to = parameters_by_name(*model);
  EXPECT_EQ(from.size(), to.size());
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : from) {
    EXPECT_TRUE(to.count(name)) << kind << " lacks parameter " << name;
    if (to.count(name)) const_cast<torch::Tensor&>(to.at(name)).copy_(p);
  }
  return model;
}

struct LayeredCase {
  GruVariant variant;
  int64_t layers;
  double dropout;
  torch::ScalarType dtype;
  bool lengths;
};

class MultiLayerGru : public ::testing::TestWithParam<LayeredCase> {};

TEST_P(MultiLayerGru, V3AndV4EqualTheBuiltInGruKind) {
  const auto c = GetParam();
  torch::manual_seed(2);
  auto builtin = make_model({"gru", 3, 5, c.layers, c.dropout});
  builtin->to(c.dtype);
  auto block = make_like("gru_" + to_string(c.variant), *builtin, c.layers, c.dropout, c.dtype);
  const LayeredData d(c.dtype, c.layers, c.lengths ? std::vector<int64_t>{8, 3, 0, 7} : std::vector<int64_t>{});
  const auto got = d.run(*block);
  for (const auto& [name, t] : got) EXPECT_TRUE(torch::isfinite(t).all().item<bool>()) << name;
  expect_close(got, d.run(*builtin), verify::tolerance_for(c.dtype),
               "GRU " + to_string(c.variant) + " L=" + std::to_string(c.layers) +
                   (c.dropout > 0 ? " dropout" : "") +
                   (c.dtype == torch::kFloat64 ? " f64" : " f32") +
                   (c.lengths ? " lengths" : " full") + " vs built-in gru");
}

std::vector<LayeredCase> layered_cases() {
  std::vector<LayeredCase> cases;
  for (auto v : {GruVariant::kV3, GruVariant::kV4}) {
    for (int64_t layers : {2, 3}) {
      for (double dropout : {0.0, 0.3}) {
        for (auto dtype : {torch::kFloat64, torch::kFloat32}) {
          cases.push_back({v, layers, dropout, dtype, dropout > 0});
        }
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, MultiLayerGru, ::testing::ValuesIn(layered_cases()),
                         [](const auto& info) {
                           const auto& c = info.param;
                           return to_string(c.variant) + "_L" + std::to_string(c.layers) +
                                  (c.dropout > 0 ? "_dropout_lengths" : "_full") +
                                  (c.dtype == torch::kFloat64 ? "_f64" : "_f32");
                         });

TEST(GruVariants, MultiLayerV1AndV2AreOneFunction) {
  torch::manual_seed(4);
  auto v1 = make_model({"gru_v1", 3, 5, 3, 0.25});
  v1->to(torch::kFloat64);
  auto v2 = make_like("gru_v2", *v1, 3, 0.25, torch::kFloat64);
  const LayeredData d(torch::kFloat64, 3, {8, 1, 5, 0});
  expect_close(d.run(*v2), d.run(*v1), 1e-10, "GRU v2 vs v1, L=3, dropout, lengths");
}

TEST(GruVariants, MultiLayerVlrnnEqualsFullBpttWithDropout) {
  for (auto kind : {"gru_v1", "gru_v2", "gru_v3", "gru_v4"}) {
    torch::manual_seed(8);
    auto model = make_model({kind, 3, 4, 2, 0.3});
    model->to(torch::kFloat64);
    auto head = make_head("mse", 4, 2);
    head->to(torch::kFloat64);
    SequenceBatch batch;
    batch.inputs = torch::randn({11, 4, 3}, torch::kFloat64).requires_grad_(true);  // [T, B, F]
    batch.targets = torch::randn({11, 4, 2}, torch::kFloat64);
    batch.lengths = torch::tensor(std::vector<int64_t>{11, 4, 9, 1});
    const State h0{torch::randn({2, 4, 4}, torch::kFloat64).requires_grad_(true)};
    const Workload workload{*model, *head, batch, h0, Reduction::kSum};
    auto full = make_method("full");
    auto vlrnn = make_method_from_spec("vlrnn:block_length=4");
    torch::manual_seed(1);
    const auto ref = verify::run_and_snapshot(*full, workload);
    torch::manual_seed(1);
    const auto got = verify::run_and_snapshot(*vlrnn, workload);
    const auto diff = verify::compare(got, ref);
    std::cout << "[ maxdiff  ] " << kind << " L=2 dropout vlrnn:block_length=4 vs full: " << diff.max_rel
              << " (" << diff.worst << ")\n";
    EXPECT_LE(diff.max_rel, 1e-10) << kind << ": worst " << diff.worst;
  }
}

// ---- contract ------------------------------------------------------------------------------

TEST(GruVariants, DoubleBackwardIsRejected) {
  const Problem p(torch::kFloat64);
  auto x = p.x.clone().requires_grad_(true);
  auto [z, h] = gru_layer(GruVariant::kV4, x, p.h0, p.w);
  auto loss = z.sum();
  expect_error_mentions(
      [&] { torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true); },
      {"double backward", "create_graph", "v4"});
}

TEST(GruVariants, OnlyWhatRequiresGradGetsAGradient) {
  const Problem p(torch::kFloat64);
  auto h0 = p.h0.clone().requires_grad_(true);
  auto [z, h] = gru_layer(GruVariant::kV3, p.x, h0, p.w);  // x and weights: no grad
  z.sum().backward();
  EXPECT_TRUE(h0.grad().defined());
  EXPECT_FALSE(p.x.grad().defined());
  EXPECT_FALSE(p.w.w_hh.grad().defined());
}

TEST(GruVariants, RegisteredAsModelKinds) {
  const auto kinds = model_kinds();
  for (auto kind : {"gru_v1", "gru_v2", "gru_v3", "gru_v4"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << kind;
    auto model = make_model({kind, 3, 4, 1});
    auto* block = dynamic_cast<GruBlock*>(model.get());
    ASSERT_NE(block, nullptr) << kind;
    EXPECT_EQ(std::string("gru_") + to_string(block->variant()), kind);
    const auto spec = model->state_spec();
    ASSERT_EQ(spec.size(), 1u);
    EXPECT_EQ(spec[0].shape_for_batch(2), (std::vector<int64_t>{1, 2, 4}));
  }
}

TEST(GruVariants, InitialisedAsLibTorchInitialisesAGru) {
  torch::manual_seed(2);
  GruBlock block(GruVariant::kV2, 7, 16);
  const double bound = 1.0 / std::sqrt(16.0);
  for (const auto& p : block.parameters()) {
    EXPECT_LE(p.abs().max().item<double>(), bound);
    EXPECT_GT(p.abs().max().item<double>(), 0.5 * bound);  // not all zero, spread over the range
  }
  EXPECT_EQ(block.weights().w_ih.sizes(), (std::vector<int64_t>{48, 7}));
  EXPECT_EQ(block.weights().w_hh.sizes(), (std::vector<int64_t>{48, 16}));
}

TEST(GruVariants, BadConfigurationsAreRejectedNamingTheArgument) {
  expect_error_mentions([] { make_model({"gru_v1", 3, 4, 0}); }, {"num_layers", ">= 1", "got 0"});
  expect_error_mentions([] { make_model({"gru_v3", 3, 4, 2, 1.5}); },
                        {"dropout", "[0, 1)", "got 1.5"});
  expect_error_mentions([] { make_model({"gru_v1", 3, 0, 1}); }, {"hidden_size", "> 0", "got 0"});
  expect_error_mentions([] { make_model({"gru_v4", 3, -2, 1}); }, {"hidden_size", "> 0", "got -2"});
  expect_error_mentions([] { make_model({"gru_v2", 0, 4, 1}); }, {"input_size", "> 0", "got 0"});
  expect_error_mentions([] { make_model({"gru_v9", 3, 4, 1}); }, {"model", "gru_v9", "gru_v1"});
  expect_error_mentions([] { gru_variant_from_string("v7", "variant"); },
                        {"variant", "v7", "v1, v2, v3, v4"});
}

TEST(GruVariants, BadInputsAreRejectedNamingTheArgument) {
  GruBlock model(GruVariant::kV3, 3, 4);
  const auto x = torch::randn({5, 2, 3});  // [Tb, B, F]
  const State h0{torch::zeros({1, 2, 4})};
  expect_error_mentions([&] { model.forward(torch::randn({5, 2, 2}), h0); },
                        {"x_block", "F = 3", "[5, 2, 2]"});
  expect_error_mentions([&] { model.forward(x, State{torch::zeros({2, 4})}); },
                        {"h_entry", "[L, B, H] = [1, 2, 4]", "[2, 4]"});
  expect_error_mentions([&] { model.forward(x, h0, torch::tensor(std::vector<int64_t>{5, 6})); },
                        {"lengths", "[0, Tb] = [0, 5]", "[5, 6]"});
  expect_error_mentions([&] { model.forward(x, h0, torch::tensor(std::vector<int64_t>{5})); },
                        {"lengths", "[B] = [2]", "[1]"});
  expect_error_mentions([&] { model.forward(x.to(torch::kFloat64), h0); },
                        {"x", "Float", "Double"});
  torch::nn::GRU two_layers(torch::nn::GRUOptions(3, 4).num_layers(2));
  expect_error_mentions([&] { model.copy_weights_from(two_layers); },
                        {"gru", "num_layers = 1", "num_layers = 2"});
  torch::nn::GRU other_size(torch::nn::GRUOptions(3, 5));
  expect_error_mentions([&] { model.copy_weights_from(other_size); },
                        {"gru", "hidden_size 4", "5"});
}

}  // namespace
}  // namespace vlrnn
