#include "test_util.h"

#include "vlrnn/cells/linear_scan.h"

#include <cmath>

// Shapes: Tb = steps, B = batch, H = hidden; a, b [Tb, B, H], h0 [B, H].

namespace vlrnn {
namespace {

using testing::expect_error_mentions;
using testing::rel_diff;

struct ScanRun {
  torch::Tensor h, grad_a, grad_b, grad_h0;
};

// Runs `scan` on fresh leaves and back-propagates L = Re Σ h ⊙ seed.
template <typename Scan>
ScanRun run_scan(const Scan& scan, const torch::Tensor& a, const torch::Tensor& b,
                 const torch::Tensor& h0, const torch::Tensor& seed) {
  auto al = a.detach().clone().requires_grad_(true);
  auto bl = b.detach().clone().requires_grad_(true);
  auto hl = h0.detach().clone().requires_grad_(true);
  auto h = scan(al, bl, hl);
  torch::real(h * seed).sum().backward();
  return {h.detach(), al.grad(), bl.grad(), hl.grad()};
}

void expect_equal_runs(const ScanRun& got, const ScanRun& ref, double tol, const std::string& what) {
  for (auto [name, g, r] : {std::tuple{"h", got.h, ref.h}, {"grad a", got.grad_a, ref.grad_a},
                            {"grad b", got.grad_b, ref.grad_b}, {"grad h0", got.grad_h0, ref.grad_h0}}) {
    ASSERT_TRUE(g.defined() && torch::isfinite(g).all().item<bool>()) << what << ": " << name;
    const double d = rel_diff(g, r);
    EXPECT_LE(d, tol) << what << ": " << name << " maxdiff (relative) " << d;
  }
}

// Decays in (0, 1) as the models produce them (sigmoid of a normal draw).
torch::Tensor decays(int64_t steps, torch::ScalarType dtype) {
  return torch::sigmoid(2 * torch::randn({steps, 3, 5}, torch::dtype(dtype)));
}

TEST(LinearScan, SequentialKernelEqualsTheStepLoopBitForBit) {
  // The loop's products in the loop's order (NOTE [ One pass on the CPU ]): equal, not close,
  // in float32 too, forward and backward; complex to the rounding of a complex product.
  for (auto dtype : {torch::kFloat32, torch::kFloat64, torch::kComplexFloat}) {
    for (int64_t steps : {1, 2, 37}) {
      torch::manual_seed(steps);
      auto a = decays(steps, torch::kFloat64);
      if (dtype == torch::kComplexFloat) a = torch::polar(a, torch::randn_like(a));
      a = a.to(dtype);
      const auto b = torch::randn({steps, 3, 5}, torch::dtype(dtype));
      const auto h0 = torch::randn({3, 5}, torch::dtype(dtype));
      const auto seed = torch::randn({steps, 3, 5}, torch::dtype(dtype));
      const auto ref = run_scan(linear_scan_loop, a, b, h0, seed);
      const auto got = run_scan(
          [](auto& x, auto& y, auto& z) { return linear_scan(x, y, z, ScanKernel::kSequential); },
          a, b, h0, seed);
      // Complex: c10::complex's product against ATen's vectorised one, a few ulps apart.
      const double tol = dtype == torch::kComplexFloat ? 1e-6 : 0.0;
      expect_equal_runs(got, ref, tol, "Tb=" + std::to_string(steps) + " " +
                                           std::string(c10::toString(dtype)));
    }
  }
}

TEST(LinearScan, SequentialKernelOnTwoThreadsEqualsTheStepLoopBitForBit) {
  // The kernel splits the state's B · H elements into tasks of 4096: 8192 are two tasks, each
  // its elements' own recurrence, so two threads still compute the loop's numbers exactly.
  testing::IntraOpThreads two_threads(2);
  for (auto dtype : {torch::kFloat32, torch::kFloat64}) {
    torch::manual_seed(5);
    const auto a = torch::sigmoid(2 * torch::randn({7, 8, 1024}, torch::dtype(dtype)));
    const auto b = torch::randn({7, 8, 1024}, torch::dtype(dtype));
    const auto h0 = torch::randn({8, 1024}, torch::dtype(dtype));
    const auto seed = torch::randn({7, 8, 1024}, torch::dtype(dtype));
    expect_equal_runs(
        run_scan(
            [](auto& x, auto& y, auto& z) { return linear_scan(x, y, z, ScanKernel::kSequential); },
            a, b, h0, seed),
        run_scan(linear_scan_loop, a, b, h0, seed), 0.0,
        "2 threads " + std::string(c10::toString(dtype)));
  }
}

TEST(LinearScan, EqualsTheStepLoopForwardAndBackward) {
  // Tb = 1, a square Tb, Tb not a multiple of the chunk, a long block; and chunks of 1, 3, Tb
  // (0 = the default, ceil(sqrt(Tb))).
  for (int64_t steps : {1, 2, 9, 10, 37, 300}) {
    for (int64_t chunk : {0, 1, 3, 1000}) {
      torch::manual_seed(steps + 7 * chunk);
      const auto a = decays(steps, torch::kFloat64);
      const auto b = torch::randn({steps, 3, 5}, torch::kFloat64);
      const auto h0 = torch::randn({3, 5}, torch::kFloat64);
      const auto seed = torch::randn({steps, 3, 5}, torch::kFloat64);
      const auto ref = run_scan(linear_scan_loop, a, b, h0, seed);
      const auto chunked = [chunk](auto& x, auto& y, auto& z) {
        return linear_scan(x, y, z, ScanKernel::kChunked, chunk);
      };
      const auto got = run_scan(chunked, a, b, h0, seed);
      expect_equal_runs(got, ref, 1e-12, "Tb=" + std::to_string(steps) + " chunk=" + std::to_string(chunk));
    }
  }
}

TEST(LinearScan, ComplexDecaysEqualTheStepLoop) {
  // The LRU's rotating decay: |a| < 1, complex b and h0.
  torch::manual_seed(3);
  const int64_t steps = 41;
  const auto a = torch::polar(torch::rand({steps, 3, 5}, torch::kFloat64) * 0.5 + 0.49,
                              torch::rand({steps, 3, 5}, torch::kFloat64) * 6.28);
  const auto b = torch::complex(torch::randn({steps, 3, 5}, torch::kFloat64),
                                torch::randn({steps, 3, 5}, torch::kFloat64));
  const auto h0 = torch::complex(torch::randn({3, 5}, torch::kFloat64), torch::randn({3, 5}, torch::kFloat64));
  const auto seed = torch::complex(torch::randn({steps, 3, 5}, torch::kFloat64),
                                   torch::randn({steps, 3, 5}, torch::kFloat64));
  const auto ref = run_scan(linear_scan_loop, a, b, h0, seed);
  for (auto kernel : {ScanKernel::kSequential, ScanKernel::kChunked}) {
    const auto got =
        run_scan([kernel](auto& x, auto& y, auto& z) { return linear_scan(x, y, z, kernel); }, a, b,
                 h0, seed);
    expect_equal_runs(got, ref, 1e-12, "complex");
  }
}

TEST(LinearScan, TinyAndZeroDecaysStayFiniteAndEqualTheLoop) {
  // Products of small decays underflow to 0 in float32 within a few steps; a form that divides
  // by the running product would give inf or nan here (NOTE [ A chunked scan that never divides ]).
  torch::manual_seed(4);
  const int64_t steps = 64;
  auto a = decays(steps, torch::kFloat32);
  a.index_put_({torch::indexing::Slice(0, steps, 3)}, 1e-30);
  a.index_put_({torch::indexing::Slice(1, steps, 7)}, 0.0);
  const auto b = torch::randn({steps, 3, 5});
  const auto h0 = torch::randn({3, 5});
  const auto seed = torch::randn({steps, 3, 5});
  const auto ref = run_scan(linear_scan_loop, a.to(torch::kFloat64), b.to(torch::kFloat64),
                            h0.to(torch::kFloat64), seed.to(torch::kFloat64));
  for (auto kernel : {ScanKernel::kSequential, ScanKernel::kChunked}) {
    const auto got =
        run_scan([kernel](auto& x, auto& y, auto& z) { return linear_scan(x, y, z, kernel); }, a, b,
                 h0, seed);
    expect_equal_runs(got, ref, 1e-5, "float32 with tiny decays");
  }
}

TEST(LinearScan, BadInputsNameTheArgument) {
  const auto a = torch::rand({4, 2, 3}), b = torch::rand({4, 2, 3}), h0 = torch::rand({2, 3});
  expect_error_mentions([&] { linear_scan(a, torch::rand({4, 2, 2}), h0); }, {"b:", "[4, 2, 3]"});
  expect_error_mentions([&] { linear_scan(a, b, torch::rand({3, 2})); }, {"h0:", "[2, 3]"});
  expect_error_mentions([&] { linear_scan(a, b, h0.to(torch::kFloat64)); }, {"one dtype", "Double"});
  expect_error_mentions([&] { linear_scan(torch::rand({0, 2, 3}), torch::rand({0, 2, 3}), h0); },
                        {"a:", "Tb >= 1"});
  expect_error_mentions([&] { linear_scan(a, b, h0, ScanKernel::kChunked, -1); }, {"chunk", "-1"});
  expect_error_mentions([] { recurrence_form_from_string("fast"); }, {"scan", "loop", "fast"});
}

}  // namespace
}  // namespace vlrnn
