#include "vlrnn/cells/linear_scan.h"

// Shape legend: Tb = steps in the block, S... = the state's shape, C = steps per chunk,
// n = chunks (ceil(Tb / C)), N = elements of one state (the product of S...).

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <array>
#include <cmath>
#include <vector>

namespace vlrnn {

std::string to_string(RecurrenceForm form) { return form == RecurrenceForm::kScan ? "scan" : "loop"; }

RecurrenceForm recurrence_form_from_string(const std::string& name) {
  if (name == "scan") return RecurrenceForm::kScan;
  if (name == "loop") return RecurrenceForm::kLoop;
  TORCH_CHECK(false, "recurrence form: expected \"scan\" or \"loop\", got \"", name, "\"");
}

namespace {

void check_scan_inputs(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0) {
  TORCH_CHECK(a.defined() && a.dim() >= 1 && a.size(0) >= 1,
              "a: expected shape [Tb, S...] with Tb >= 1, got ",
              a.defined() ? a.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(b.defined() && b.sizes() == a.sizes(), "b: expected a's shape ", a.sizes(),
              ", got ", b.defined() ? b.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(h0.defined() && h0.sizes() == a.sizes().slice(1), "h0: expected shape ",
              a.sizes().slice(1), " (a's without Tb), got ",
              h0.defined() ? h0.sizes() : torch::IntArrayRef{});
  TORCH_CHECK(b.scalar_type() == a.scalar_type() && h0.scalar_type() == a.scalar_type(),
              "a, b, h0: expected one dtype, got ", a.scalar_type(), ", ", b.scalar_type(),
              " and ", h0.scalar_type());
}

// NOTE [ A chunked scan that never divides ] (linear_scan.h); no autograd.
torch::Tensor chunked_scan(const torch::Tensor& a_in, const torch::Tensor& b_in,
                           const torch::Tensor& h0, int64_t chunk) {
  const int64_t steps = a_in.size(0);
  const int64_t c = chunk > 0 ? std::min(chunk, steps)
                              : int64_t(std::ceil(std::sqrt(double(steps))));
  const int64_t n = (steps + c - 1) / c;
  std::vector<int64_t> shape{n, c};  // [n, C, S...]
  for (int64_t d : a_in.sizes().slice(1)) shape.push_back(d);
  auto a = a_in.contiguous(), b = b_in.contiguous();
  if (n * c > steps) {  // pad the last chunk with steps that keep the state: a = 1, b = 0
    std::vector<int64_t> pad_shape(a.sizes().begin(), a.sizes().end());
    pad_shape[0] = n * c - steps;
    a = torch::cat({a, torch::ones(pad_shape, a.options())});
    b = torch::cat({b, torch::zeros(pad_shape, b.options())});
  }
  a = a.view(shape);  // [n, C, S...]
  b = b.view(shape);
  auto local = torch::empty(shape, b.options());  // [n, C, S...] scan from a zero entry
  auto prod = torch::empty(shape, a.options());   // [n, C, S...] a_0 ⋯ a_j inside the chunk
  local.select(1, 0).copy_(b.select(1, 0));
  prod.select(1, 0).copy_(a.select(1, 0));
  for (int64_t j = 1; j < c; ++j) {
    auto l = local.select(1, j);  // [n, S...]
    torch::mul_out(l, a.select(1, j), local.select(1, j - 1));
    l.add_(b.select(1, j));
    auto p = prod.select(1, j);  // [n, S...]
    torch::mul_out(p, prod.select(1, j - 1), a.select(1, j));
  }
  std::vector<int64_t> entry_shape{n};  // [n, S...] each chunk's entry state
  for (int64_t d : h0.sizes()) entry_shape.push_back(d);
  auto entry = torch::empty(entry_shape, h0.options());
  entry.select(0, 0).copy_(h0);
  for (int64_t k = 1; k < n; ++k) {
    auto e = entry.select(0, k);
    torch::mul_out(e, prod.select(0, k - 1).select(0, c - 1), entry.select(0, k - 1));
    e.add_(local.select(0, k - 1).select(0, c - 1));
  }
  local.addcmul_(prod, entry.unsqueeze(1));  // h = local + P ⊙ e, [n, C, S...]
  std::vector<int64_t> flat(shape.begin() + 1, shape.end());
  flat[0] = n * c;
  return local.view(flat).narrow(0, 0, steps);  // [Tb, S...]
}

// NOTE [ One pass on the CPU ] (linear_scan.h). Real or complex element types.
// Elements of the state per parallel task: a task streams Tb rows of this many elements.
constexpr int64_t kSequentialScanGrain = 4096;
template <typename T>
T conj_value(T v) { return v; }
template <typename T>
c10::complex<T> conj_value(c10::complex<T> v) { return {v.real(), -v.imag()}; }

// h[t] = a[t] ⊙ h[t-1] + b[t] in one pass over memory; a, b, h [Tb, N], h0 [N] contiguous.
template <typename T>
void sequential_forward(const T* a, const T* b, const T* h0, T* h, int64_t steps, int64_t n) {
  at::parallel_for(0, n, kSequentialScanGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) h[i] = a[i] * h0[i] + b[i];
    for (int64_t t = 1; t < steps; ++t) {
      const T *at = a + t * n, *bt = b + t * n, *prev = h + (t - 1) * n;
      T* ht = h + t * n;
      for (int64_t i = begin; i < end; ++i) ht[i] = at[i] * prev[i] + bt[i];
    }
  });
}

// The reverse scan (NOTE [ The reverse scan ]) in one pass, last step first: g [Tb, N] (also
// db), da [Tb, N] and dh0 [N] from a, h, h0 and the incoming gradient delta [Tb, N]; da_t is
// written while g_t is still in cache.
template <typename T>
void sequential_backward(const T* a, const T* h, const T* h0, const T* delta, T* g, T* da,
                         T* dh0, int64_t steps, int64_t n) {
  at::parallel_for(0, n, kSequentialScanGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = steps - 1; t >= 0; --t) {
      const T *dt = delta + t * n, *prev = t == 0 ? h0 : h + (t - 1) * n;
      T *gt = g + t * n, *dat = da + t * n;
      if (t == steps - 1) {
        for (int64_t i = begin; i < end; ++i) gt[i] = dt[i];
      } else {
        const T *a_next = a + (t + 1) * n, *g_next = g + (t + 1) * n;
        for (int64_t i = begin; i < end; ++i) gt[i] = dt[i] + conj_value(a_next[i]) * g_next[i];
      }
      for (int64_t i = begin; i < end; ++i) dat[i] = gt[i] * conj_value(prev[i]);
    }
    for (int64_t i = begin; i < end; ++i) dh0[i] = conj_value(a[i]) * g[i];
  });
}

torch::Tensor sequential_scan(const torch::Tensor& a_in, const torch::Tensor& b_in,
                              const torch::Tensor& h0_in) {
  const auto a = a_in.contiguous(), b = b_in.contiguous(), h0 = h0_in.contiguous();
  auto h = torch::empty_like(a, at::MemoryFormat::Contiguous);  // [Tb, S...]
  const int64_t steps = a.size(0), n = h0.numel();
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(a.scalar_type(), "linear_scan", [&] {
    sequential_forward(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), h0.data_ptr<scalar_t>(),
                       h.data_ptr<scalar_t>(), steps, n);
  });
  return h;
}

// {g = db, da, dh0}
std::array<torch::Tensor, 3> sequential_reverse_scan(const torch::Tensor& a_in,
                                                     const torch::Tensor& h,
                                                     const torch::Tensor& h0_in,
                                                     const torch::Tensor& delta_in) {
  const auto a = a_in.contiguous(), h0 = h0_in.contiguous(), delta = delta_in.contiguous();
  auto g = torch::empty_like(a, at::MemoryFormat::Contiguous);   // [Tb, S...]
  auto da = torch::empty_like(a, at::MemoryFormat::Contiguous);  // [Tb, S...]
  auto dh0 = torch::empty_like(h0, at::MemoryFormat::Contiguous);  // [S...]
  const int64_t steps = a.size(0), n = h0.numel();
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(a.scalar_type(), "linear_scan_backward", [&] {
    sequential_backward(a.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), h0.data_ptr<scalar_t>(),
                        delta.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                        da.data_ptr<scalar_t>(), dh0.data_ptr<scalar_t>(), steps, n);
  });
  return {g, da, dh0};
}

class LinearScanFunction : public torch::autograd::Function<LinearScanFunction> {
 public:
  // chunk = 0: the sequential kernel; C > 0: the chunked scan, chunks of C steps.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b, const torch::Tensor& h0, int64_t chunk) {
    auto h = chunk == 0 ? sequential_scan(a, b, h0) : chunked_scan(a, b, h0, chunk);  // [Tb, S...]
    ctx->save_for_backward({a, h0, h});
    ctx->saved_data["chunk"] = chunk;
    return h;
  }

  // NOTE [ The reverse scan ] (linear_scan.h): the forward in reverse.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &a = saved[0], &h0 = saved[1], &h = saved[2];
    const int64_t steps = a.size(0), chunk = ctx->saved_data["chunk"].toInt();
    const auto delta = grads[0].defined() ? grads[0] : torch::zeros_like(h);  // [Tb, S...]
    if (chunk == 0) {
      const auto [g, grad_a, grad_h0] = sequential_reverse_scan(a, h, h0, delta);
      return {grad_a, g, grad_h0, torch::Tensor()};
    }
    // conj(a_{t+1}) for t < Tb-1; the last step's factor multiplies g_Tb = 0, any value works.
    auto a_next = torch::cat({a.narrow(0, 1, steps - 1).conj(), torch::ones_like(a.narrow(0, 0, 1))});
    auto g = chunked_scan(a_next.flip(0), delta.flip(0), torch::zeros_like(h0), chunk).flip(0);
    auto h_prev = torch::cat({h0.unsqueeze(0), h.narrow(0, 0, steps - 1)});  // [Tb, S...]
    auto grad_a = g * h_prev.conj();
    auto grad_h0 = g.select(0, 0) * a.select(0, 0).conj();
    return {grad_a, g, grad_h0, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_scan(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& h0,
                          ScanKernel kernel, int64_t chunk) {
  check_scan_inputs(a, b, h0);
  TORCH_CHECK(chunk >= 0, "chunk: expected >= 0 (0 = ceil(sqrt(Tb))), got ", chunk);
  if (kernel == ScanKernel::kAuto) {
    kernel = a.device().is_cpu() ? ScanKernel::kSequential : ScanKernel::kChunked;
  }
  if (kernel == ScanKernel::kSequential) {
    TORCH_CHECK(a.device().is_cpu(), "kernel: the sequential scan runs on the CPU, got a on ",
                a.device(), " (ScanKernel::kChunked or kAuto run anywhere)");
    return LinearScanFunction::apply(a, b, h0, 0);
  }
  const int64_t steps = a.size(0);
  const int64_t c = chunk > 0 ? chunk : int64_t(std::ceil(std::sqrt(double(steps))));
  // NOTE [ The scan accumulates in double ] (linear_scan.h).
  const auto wide = a.is_complex() ? torch::kComplexDouble : torch::kDouble;
  if (a.scalar_type() == wide) return LinearScanFunction::apply(a, b, h0, c);
  return LinearScanFunction::apply(a.to(wide), b.to(wide), h0.to(wide), c).to(a.scalar_type());
}

torch::Tensor linear_scan_loop(const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& h0) {
  check_scan_inputs(a, b, h0);
  // unbind, not a[t]: the backward of a[t] (select) writes its gradient into zeros as
  // large as all of a, once per step (O(Tb²) bytes); unbind's backward stacks the steps' once.
  const auto a_steps = a.unbind(0), b_steps = b.unbind(0);  // Tb x [S...]
  std::vector<torch::Tensor> hs;                            // Tb x [S...]
  auto h = h0;
  for (size_t t = 0; t < a_steps.size(); ++t) {
    h = a_steps[t] * h + b_steps[t];
    hs.push_back(h);
  }
  return torch::stack(hs);  // [Tb, S...]
}

torch::Tensor linear_recurrence(RecurrenceForm form, const torch::Tensor& a,
                                const torch::Tensor& b, const torch::Tensor& h0) {
  return form == RecurrenceForm::kScan ? linear_scan(a, b, h0) : linear_scan_loop(a, b, h0);
}

}  // namespace vlrnn
