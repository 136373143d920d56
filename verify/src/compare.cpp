#include "vlrnn/verify/compare.h"

#include <algorithm>
#include <cmath>

namespace vlrnn::verify {
namespace {

void clear_grad(const torch::Tensor& t) {
  if (t.defined() && t.is_leaf() && t.grad().defined()) t.mutable_grad() = torch::Tensor();
}

// Dense, to compare: an embedding's sparse=True gradient is sparse, whose comparison ops
// (abs, max) LibTorch does not have.
torch::Tensor grad_or_zeros(const torch::Tensor& t) {
  if (!t.grad().defined()) return torch::zeros_like(t).detach();
  return t.grad().is_sparse() ? t.grad().detach().to_dense() : t.grad().detach().clone();
}

}  // namespace

GradientSnapshot run_and_snapshot(GradientMethod& method, const Workload& workload) {
  for (const auto& p : workload.model.parameters()) clear_grad(p);
  for (const auto& p : workload.head.parameters()) clear_grad(p);
  for (const auto& h : workload.h0) clear_grad(h);
  clear_grad(workload.batch.inputs);

  const GradientResult result = method.compute(workload);

  GradientSnapshot snap;
  snap.counters = result.counters;
  snap.tensors.emplace_back("loss", result.loss.detach().clone());
  snap.tensors.emplace_back("step_losses", result.step_losses.detach().clone());
  for (const auto& p : workload.model.named_parameters()) {
    snap.tensors.emplace_back("grad model." + p.key(), grad_or_zeros(p.value()));
  }
  for (const auto& p : workload.head.named_parameters()) {
    snap.tensors.emplace_back("grad head." + p.key(), grad_or_zeros(p.value()));
  }
  for (size_t i = 0; i < workload.h0.size(); ++i) {
    if (workload.h0[i].requires_grad()) {
      snap.tensors.emplace_back("grad h0[" + std::to_string(i) + "]", grad_or_zeros(workload.h0[i]));
    }
  }
  if (workload.batch.inputs.requires_grad()) {
    snap.tensors.emplace_back("grad inputs", grad_or_zeros(workload.batch.inputs));
  }
  for (size_t i = 0; i < result.final_state.size(); ++i) {
    snap.tensors.emplace_back("final_state[" + std::to_string(i) + "]",
                              result.final_state[i].detach().clone());
  }
  return snap;
}

Difference compare(const GradientSnapshot& got, const GradientSnapshot& reference) {
  TORCH_CHECK(got.tensors.size() == reference.tensors.size(), "compare: the snapshots hold ",
              got.tensors.size(), " and ", reference.tensors.size(), " tensors");
  Difference diff;
  double dot = 0.0, got_sq = 0.0, ref_sq = 0.0, err_sq = 0.0;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    const auto& [name, a] = got.tensors[i];
    const auto& [ref_name, b] = reference.tensors[i];
    TORCH_CHECK(name == ref_name, "compare: tensor ", i, " is ", name, " here but ", ref_name,
                " in the reference");
    TORCH_CHECK(a.sizes() == b.sizes(), "compare: ", name, " has shape ", a.sizes(),
                " but the reference has ", b.sizes());
    auto a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
    const double abs_diff = (a64 - b64).abs().max().item<double>();
    const double scale = b64.abs().max().item<double>();
    double rel = abs_diff == 0.0 ? 0.0 : abs_diff / std::max(scale, 1e-300);
    if (std::isnan(rel)) rel = INFINITY;  // a nan anywhere must fail, never pass silently
    diff.max_abs = std::max(diff.max_abs, std::isnan(abs_diff) ? INFINITY : abs_diff);
    if (diff.worst.empty() || rel > diff.max_rel) {
      diff.max_rel = rel;
      diff.worst = name;
    }
    if (name.rfind("grad model.", 0) == 0 || name.rfind("grad head.", 0) == 0) {
      dot += (a64 * b64).sum().item<double>();
      got_sq += a64.pow(2).sum().item<double>();
      ref_sq += b64.pow(2).sum().item<double>();
      err_sq += (a64 - b64).pow(2).sum().item<double>();
    }
  }
  diff.grad_rel_error = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
  diff.grad_cosine = (got_sq > 0 && ref_sq > 0) ? dot / std::sqrt(got_sq * ref_sq) : 1.0;
  return diff;
}

double tolerance_for(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat64: return 1e-10;
    case torch::kBFloat16: return 4 * 0x1p-7;  // 4 ε
    case torch::kFloat16: return 4 * 0x1p-10;
    default: return 1e-5;
  }
}

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return c10::toString(dtype);
  }
}

}  // namespace vlrnn::verify
