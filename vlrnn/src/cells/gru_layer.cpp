#include "vlrnn/cells/gru_layer.h"

// Shape legend (vlrnn/core/shapes.h): Tb = steps in the block, B = batch, F = input features,
// H = hidden size. Gate order (r, u, n) as in vlrnn/cells/gru_variant.h; u is LibTorch's z.
//
// Every elementwise step writes into preallocated buffers with LibTorch's *_out ops, so the
// same code runs on any device; GEMMs read and write column slices of wider buffers in place
// (a [rows, k] slice of a [rows, 4H] buffer is a BLAS matrix with leading dimension 4H).

#include "block_common.h"

#include <utility>

namespace vlrnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What forward keeps (NOTE [ What each variant saves ] in gru_layer.h).
struct Activations {
  torch::Tensor hs;       // [Tb, B, H] h_1 .. h_Tb
  torch::Tensor a, b, c;  // the variant's own: v1/v2 (ru, n, rh), v3 (ru, n, ghn), v4 (a, -, -)
};

// h_t = n + u ⊙ (h_{t-1} − n)  (= (1 − u) ⊙ n + u ⊙ h_{t-1}), frozen past a sequence's end.
void update_state(torch::Tensor& h_t, const torch::Tensor& h_prev, const torch::Tensor& u,
                  const torch::Tensor& n, const BlockInput& blk, int64_t t) {
  at::sub_out(h_t, h_prev, n).mul_(u).add_(n);
  if (blk.mask.defined()) at::where_out(h_t, blk.mask[t], h_t, h_prev);
}

// ---- forward ------------------------------------------------------------------------------

// v1: one GEMM per gate and operand, per step, as Cho et al.'s formula is written.
Activations forward_v1(const BlockInput& blk, const GruWeights& w) {
  const int64_t H = blk.hidden;
  const auto opts = blk.x.options();
  Activations s;
  s.hs = torch::empty({blk.steps, blk.batch, H}, opts);      // [Tb, B, H]
  s.a = torch::empty({blk.steps, blk.batch, 2 * H}, opts);   // [Tb, B, 2H] r, u
  s.b = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] n
  s.c = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] r ⊙ h_{t-1}
  auto rows = [H](const torch::Tensor& m, int64_t gate) { return m.narrow(0, gate * H, H); };
  const auto w_ir = rows(w.w_ih, 0), w_iu = rows(w.w_ih, 1), w_in = rows(w.w_ih, 2);  // [H, F]
  const auto w_hr = rows(w.w_hh, 0), w_hu = rows(w.w_hh, 1), w_hn = rows(w.w_hh, 2);  // [H, H]
  const auto b_ir = rows(w.b_ih, 0), b_iu = rows(w.b_ih, 1), b_in = rows(w.b_ih, 2);  // [H]
  const auto b_hr = rows(w.b_hh, 0), b_hu = rows(w.b_hh, 1), b_hn = rows(w.b_hh, 2);  // [H]
  torch::Tensor h = blk.h0;  // [B, H]
  for (int64_t t = 0; t < blk.steps; ++t) {
    const auto x_t = blk.x[t];  // [B, F]
    auto ru_t = s.a[t];
    auto r = ru_t.narrow(1, 0, H), u = ru_t.narrow(1, H, H);  // [B, H]
    at::addmm_out(r, b_ir, x_t, w_ir.t()).addmm_(h, w_hr.t()).add_(b_hr).sigmoid_();
    at::addmm_out(u, b_iu, x_t, w_iu.t()).addmm_(h, w_hu.t()).add_(b_hu).sigmoid_();
    auto rh = s.c[t];  // [B, H]
    at::mul_out(rh, r, h);
    auto n = s.b[t];  // [B, H]
    at::addmm_out(n, b_in, x_t, w_in.t()).addmm_(rh, w_hn.t()).add_(b_hn).tanh_();
    auto h_t = s.hs[t];
    update_state(h_t, h, u, n, blk, t);
    h = h_t;
  }
  return s;
}

// v2: the input GEMMs of all steps in one; W_hr and W_hu in one GEMM per step.
Activations forward_v2(const BlockInput& blk, const GruWeights& w) {
  const int64_t H = blk.hidden;
  const auto opts = blk.x.options();
  Activations s;
  s.hs = torch::empty({blk.steps, blk.batch, H}, opts);      // [Tb, B, H]
  s.a = torch::empty({blk.steps, blk.batch, 2 * H}, opts);   // [Tb, B, 2H] r, u
  s.b = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] n
  s.c = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] r ⊙ h_{t-1}
  // [Tb*B, F] x [F, 3H]: every step's input projection at once (gx freed after forward).
  const auto gx = torch::addmm(w.b_ih, blk.x2, w.w_ih.t()).view({blk.steps, blk.batch, 3 * H});
  const auto w_hru = w.w_hh.narrow(0, 0, 2 * H), b_hru = w.b_hh.narrow(0, 0, 2 * H);  // [2H, H], [2H]
  const auto w_hn = w.w_hh.narrow(0, 2 * H, H), b_hn = w.b_hh.narrow(0, 2 * H, H);    // [H, H], [H]
  torch::Tensor h = blk.h0;  // [B, H]
  for (int64_t t = 0; t < blk.steps; ++t) {
    const auto gx_t = gx[t];  // [B, 3H]
    auto ru_t = s.a[t];       // [B, 2H]
    at::addmm_out(ru_t, b_hru, h, w_hru.t()).add_(gx_t.narrow(1, 0, 2 * H)).sigmoid_();
    const auto r = ru_t.narrow(1, 0, H), u = ru_t.narrow(1, H, H);  // [B, H]
    auto rh = s.c[t];  // [B, H]
    at::mul_out(rh, r, h);
    auto n = s.b[t];  // [B, H]
    at::addmm_out(n, b_hn, rh, w_hn.t()).add_(gx_t.narrow(1, 2 * H, H)).tanh_();
    auto h_t = s.hs[t];
    update_state(h_t, h, u, n, blk, t);
    h = h_t;
  }
  return s;
}

// v3: input GEMM as v2, all three recurrent GEMMs in one per step; saves σ and tanh outputs.
Activations forward_v3(const BlockInput& blk, const GruWeights& w) {
  const int64_t H = blk.hidden;
  const auto opts = blk.x.options();
  Activations s;
  s.hs = torch::empty({blk.steps, blk.batch, H}, opts);      // [Tb, B, H]
  s.a = torch::empty({blk.steps, blk.batch, 2 * H}, opts);   // [Tb, B, 2H] r, u
  s.b = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] n
  s.c = torch::empty({blk.steps, blk.batch, H}, opts);       // [Tb, B, H] W_hn h_{t-1} + b_hn
  const auto gx = torch::addmm(w.b_ih, blk.x2, w.w_ih.t()).view({blk.steps, blk.batch, 3 * H});
  auto gh = torch::empty({blk.batch, 3 * H}, opts);  // [B, 3H] this step's recurrent GEMM
  torch::Tensor h = blk.h0;                          // [B, H]
  for (int64_t t = 0; t < blk.steps; ++t) {
    const auto gx_t = gx[t];  // [B, 3H]
    at::addmm_out(gh, w.b_hh, h, w.w_hh.t());
    auto ru_t = s.a[t];  // [B, 2H]
    at::add_out(ru_t, gx_t.narrow(1, 0, 2 * H), gh.narrow(1, 0, 2 * H)).sigmoid_();
    auto ghn = s.c[t];  // [B, H]
    ghn.copy_(gh.narrow(1, 2 * H, H));
    auto n = s.b[t];  // [B, H]
    at::addcmul_out(n, gx_t.narrow(1, 2 * H, H), ru_t.narrow(1, 0, H), ghn).tanh_();
    auto h_t = s.hs[t];
    update_state(h_t, h, ru_t.narrow(1, H, H), n, blk, t);
    h = h_t;
  }
  return s;
}

// v4: v3's arithmetic, op for op (so the same numbers), but the pre-activations are
// accumulated in place into the input-GEMM output and r, u, n live in per-step scratch.
Activations forward_v4(const BlockInput& blk, const GruWeights& w) {
  const int64_t H = blk.hidden;
  const auto opts = blk.x.options();
  Activations s;
  s.hs = torch::empty({blk.steps, blk.batch, H}, opts);  // [Tb, B, H]
  // [Tb, B, 3H]: gx, then (a_r, a_u, a_n) once each step has added its recurrent part.
  s.a = torch::addmm(w.b_ih, blk.x2, w.w_ih.t()).view({blk.steps, blk.batch, 3 * H});
  auto gh = torch::empty({blk.batch, 3 * H}, opts);  // [B, 3H]
  auto ru = torch::empty({blk.batch, 2 * H}, opts);  // [B, 2H] r, u (scratch)
  auto n = torch::empty({blk.batch, H}, opts);       // [B, H] n (scratch)
  torch::Tensor h = blk.h0;                          // [B, H]
  for (int64_t t = 0; t < blk.steps; ++t) {
    at::addmm_out(gh, w.b_hh, h, w.w_hh.t());
    auto a_t = s.a[t];  // [B, 3H]
    auto a_ru = a_t.narrow(1, 0, 2 * H);
    at::sigmoid_out(ru, a_ru.add_(gh.narrow(1, 0, 2 * H)));
    auto a_n = a_t.narrow(1, 2 * H, H);
    at::tanh_out(n, a_n.addcmul_(ru.narrow(1, 0, H), gh.narrow(1, 2 * H, H)));
    auto h_t = s.hs[t];
    update_state(h_t, h, ru.narrow(1, H, H), n, blk, t);
    h = h_t;
  }
  return s;
}

// ---- backward (the forward in reverse) ----------------------------------------------------

struct GruGrads {
  torch::Tensor dx;                        // [Tb, B, F]
  torch::Tensor dh0;                       // [1, B, H]
  torch::Tensor dw_ih, dw_hh, db_ih, db_hh;  // [3H, F], [3H, H], [3H], [3H]
};

// Which gradients the caller wants (AutogradContext::needs_input_grad).
struct GruNeeds {
  bool x = true, w_ih = true, w_hh = true, b_ih = true, b_hh = true;
};

// Walks the steps from last to first. For each it adds z_t's share to δh_t, applies the
// mask, and calls step(t, h_{t-1}, δh_new [B, H], δh_{t-1} out [B, H]), which back-propagates
// through the GRU cell and stores its per-step gate gradients. Returns dL/dh_0 [B, H].
template <typename Step>
torch::Tensor reverse_steps(const BlockInput& blk, const torch::Tensor& hs, const torch::Tensor& dz,
                            const torch::Tensor& dh_exit, Step&& step) {
  auto dh = dh_exit.select(0, 0).clone(at::MemoryFormat::Contiguous);  // [B, H] δh_t
  auto dh_prev = torch::empty_like(dh);                                // [B, H] δh_{t-1}
  auto dh_new = blk.mask.defined() ? torch::empty_like(dh) : torch::Tensor();  // [B, H]
  for (int64_t t = blk.steps - 1; t >= 0; --t) {
    const auto h_prev = t > 0 ? hs[t - 1] : blk.h0;  // [B, H]
    const auto dz_t = dz[t];                         // [B, H]
    if (blk.mask.defined()) {
      const auto m = blk.mask[t];  // [B, 1]
      // z_t = m_t ? h_t : 0, then h_t = m_t ? h_new : h_{t-1}; selecting (not multiplying)
      // keeps whatever a padded step's δz holds out of the sums.
      dh.add_(at::where_out(dh_new, m, dz_t, blk.zero));
      at::where_out(dh_new, m, dh, blk.zero);
      step(t, h_prev, dh_new, dh_prev);
      at::where_out(dh_prev, m, dh_prev, dh);  // a frozen step passes δh_t straight through
    } else {
      dh.add_(dz_t);
      step(t, h_prev, dh, dh_prev);
    }
    std::swap(dh, dh_prev);
  }
  return dh;
}

// v1 and v2: δG [Tb, B, 3H] = (δr_pre, δu_pre, δn_pre) is the gradient of both gx and the
// recurrent pre-activations (b_ih and b_hh enter each gate the same way).
GruGrads backward_v1_v2(GruVariant variant, const BlockInput& blk, const GruWeights& w,
                        const Activations& s, const torch::Tensor& dz, const torch::Tensor& dh_exit,
                        const GruNeeds& needs) {
  const int64_t H = blk.hidden, rows = blk.steps * blk.batch;
  const auto opts = blk.x.options();
  auto dg = torch::empty({blk.steps, blk.batch, 3 * H}, opts);  // [Tb, B, 3H]
  auto dh_direct = torch::empty({blk.batch, H}, opts);          // [B, H] δh_{t-1} via u, r
  auto dn = torch::empty({blk.batch, H}, opts);                 // [B, H] δn
  auto drh = torch::empty({blk.batch, H}, opts);                // [B, H] δ(r ⊙ h_{t-1})
  const auto w_hr = w.w_hh.narrow(0, 0, H), w_hu = w.w_hh.narrow(0, H, H);  // [H, H]
  const auto w_hru = w.w_hh.narrow(0, 0, 2 * H);                            // [2H, H]
  const auto w_hn = w.w_hh.narrow(0, 2 * H, H);                             // [H, H]
  GruGrads g;
  auto dh0 = reverse_steps(blk, s.hs, dz, dh_exit,
                           [&](int64_t t, const torch::Tensor& h_prev, const torch::Tensor& dh,
                               torch::Tensor& dh_prev) {
    const auto ru_t = s.a[t];                                       // [B, 2H]
    const auto r = ru_t.narrow(1, 0, H), u = ru_t.narrow(1, H, H);  // [B, H]
    const auto n = s.b[t];                                          // [B, H]
    auto dg_t = dg[t];                                              // [B, 3H]
    // h_t = n + u ⊙ (h_{t-1} − n)
    at::mul_out(dh_direct, dh, u);
    at::sub_out(dn, dh, dh_direct);  // δn = δh ⊙ (1 − u)
    auto du = dg_t.narrow(1, H, H);
    at::sub_out(du, h_prev, n).mul_(dh);  // δu = δh ⊙ (h_{t-1} − n), before σ'
    // n = tanh(gx_n + (r ⊙ h_{t-1}) W_hn^T + b_hn)
    auto dn_pre = dg_t.narrow(1, 2 * H, H);
    at::tanh_backward_out(dn_pre, dn, n);
    at::mm_out(drh, dn_pre, w_hn);  // [B, H] x [H, H]
    auto dr = dg_t.narrow(1, 0, H);
    at::mul_out(dr, drh, h_prev);
    dh_direct.addcmul_(drh, r);
    // r, u = σ(gx_ru + h_{t-1} W_hru^T + b_hru)
    auto d_ru = dg_t.narrow(1, 0, 2 * H);
    at::sigmoid_backward_out(d_ru, d_ru, ru_t);
    if (variant == GruVariant::kV1) {  // one GEMM per gate
      at::addmm_out(dh_prev, dh_direct, dg_t.narrow(1, 0, H), w_hr);
      dh_prev.addmm_(dg_t.narrow(1, H, H), w_hu);
    } else {  // [B, 2H] x [2H, H]
      at::addmm_out(dh_prev, dh_direct, d_ru, w_hru);
    }
  });
  g.dh0 = dh0.unsqueeze(0);
  // Block GEMMs over all Tb * B rows.
  const auto dg2 = dg.view({rows, 3 * H});  // [Tb*B, 3H]
  // [Tb*B, 3H] x [3H, F] and [3H, Tb*B] x [Tb*B, F]
  if (needs.x) g.dx = dg2.mm(w.w_ih).view({blk.steps, blk.batch, blk.input});
  if (needs.w_ih) g.dw_ih = dg2.t().mm(blk.x2);
  if (needs.b_ih) g.db_ih = dg2.sum(0);
  if (needs.b_hh) g.db_hh = dg2.sum(0);
  if (needs.w_hh) {
    // The W_hr, W_hu rows multiply h_{t-1}, the W_hn rows r ⊙ h_{t-1}: two operands, two GEMMs.
    g.dw_hh = torch::empty({3 * H, H}, opts);  // [3H, H]
    auto dw_hru = g.dw_hh.narrow(0, 0, 2 * H), dw_hn = g.dw_hh.narrow(0, 2 * H, H);
    // [2H, Tb*B] x [Tb*B, H] and [H, Tb*B] x [Tb*B, H]
    at::mm_out(dw_hru, dg2.narrow(1, 0, 2 * H).t(), blk.previous_states(s.hs));
    at::mm_out(dw_hn, dg2.narrow(1, 2 * H, H).t(), s.c.view({rows, H}));
  }
  return g;
}

// v3 and v4. The gate gradients of a step share one buffer D [Tb, B, 4H] with columns
//   (δghn, δr_pre, δu_pre, δn_pre)
// so that δGh = D[..., 0:3H] (gate order n, r, u) and δGx = D[..., H:4H] (order r, u, n) are
// both plain column ranges: each of dx, dW_ih and dW_hh is ONE block GEMM, and the per-step
// recurrent GEMM reads δGh_t against W_hh with its rows reordered to (n, r, u) (a [3H, H]
// copy per backward). v3 reads r, u, n and ghn from what forward saved; v4 recomputes r, u, n
// from the saved pre-activations, and ghn = W_hn h_{t-1} + b_hn for all steps with one GEMM
// into D's δghn columns, which each step overwrites with δghn once it has used ghn.
GruGrads backward_v3_v4(GruVariant variant, const BlockInput& blk, const GruWeights& w,
                        const Activations& s, const torch::Tensor& dz, const torch::Tensor& dh_exit,
                        const GruNeeds& needs) {
  const bool recompute = variant == GruVariant::kV4;
  const int64_t H = blk.hidden, rows = blk.steps * blk.batch;
  const auto opts = blk.x.options();
  auto d = torch::empty({blk.steps, blk.batch, 4 * H}, opts);  // [Tb, B, 4H]
  auto d2 = d.view({rows, 4 * H});                             // [Tb*B, 4H]
  const auto h_prev_all = blk.previous_states(s.hs);           // [Tb*B, H]
  const auto w_hn = w.w_hh.narrow(0, 2 * H, H);                // [H, H]
  // [3H, H] rows (W_hn, W_hr, W_hu), matching δGh's column order.
  const auto w_hh_nru = torch::cat({w_hn, w.w_hh.narrow(0, 0, 2 * H)});
  if (recompute) {
    // ghn of every step: one [Tb*B, H] x [H, H] GEMM (v4 did not save it).
    auto ghn_all = d2.narrow(1, 0, H);
    at::addmm_out(ghn_all, w.b_hh.narrow(0, 2 * H, H), h_prev_all, w_hn.t());
  }
  auto ru_scratch = recompute ? torch::empty({blk.batch, 2 * H}, opts) : torch::Tensor();  // [B, 2H]
  auto n_scratch = recompute ? torch::empty({blk.batch, H}, opts) : torch::Tensor();       // [B, H]
  auto dh_direct = torch::empty({blk.batch, H}, opts);  // [B, H] δh_{t-1} via u
  auto dn = torch::empty({blk.batch, H}, opts);         // [B, H] δn
  GruGrads g;
  auto dh0 = reverse_steps(blk, s.hs, dz, dh_exit,
                           [&](int64_t t, const torch::Tensor& h_prev, const torch::Tensor& dh,
                               torch::Tensor& dh_prev) {
    auto d_t = d[t];  // [B, 4H]
    torch::Tensor ru, n, ghn;  // [B, 2H] (r, u), [B, H], [B, H]
    if (recompute) {
      const auto a_t = s.a[t];  // [B, 3H] (a_r, a_u, a_n)
      ru = at::sigmoid_out(ru_scratch, a_t.narrow(1, 0, 2 * H));
      n = at::tanh_out(n_scratch, a_t.narrow(1, 2 * H, H));
      ghn = d_t.narrow(1, 0, H);  // until δghn overwrites it below
    } else {
      ru = s.a[t];
      n = s.b[t];
      ghn = s.c[t];
    }
    const auto r = ru.narrow(1, 0, H), u = ru.narrow(1, H, H);  // [B, H]
    // h_t = n + u ⊙ (h_{t-1} − n)
    at::mul_out(dh_direct, dh, u);
    at::sub_out(dn, dh, dh_direct);  // δn = δh ⊙ (1 − u)
    auto du = d_t.narrow(1, 2 * H, H);
    at::sub_out(du, h_prev, n).mul_(dh);  // δu = δh ⊙ (h_{t-1} − n), before σ'
    // n = tanh(gx_n + r ⊙ ghn)
    auto dn_pre = d_t.narrow(1, 3 * H, H);
    at::tanh_backward_out(dn_pre, dn, n);
    auto dr = d_t.narrow(1, H, H);
    at::mul_out(dr, dn_pre, ghn);
    auto dghn = d_t.narrow(1, 0, H);
    at::mul_out(dghn, dn_pre, r);
    // r, u = σ(gx_ru + gh_ru)
    auto d_ru = d_t.narrow(1, H, 2 * H);
    at::sigmoid_backward_out(d_ru, d_ru, ru);
    // gh = h_{t-1} W_hh^T + b_hh: one [B, 3H] x [3H, H] GEMM (δGh_t read with stride 4H)
    at::addmm_out(dh_prev, dh_direct, d_t.narrow(1, 0, 3 * H), w_hh_nru);
  });
  g.dh0 = dh0.unsqueeze(0);
  const auto dgh = d2.narrow(1, 0, 3 * H);  // [Tb*B, 3H] (δghn, δr, δu)
  const auto dgx = d2.narrow(1, H, 3 * H);  // [Tb*B, 3H] (δr, δu, δn)
  // Back from (n, r, u) row order to LibTorch's (r, u, n).
  auto to_run = [H](const torch::Tensor& nru) {
    return torch::cat({nru.narrow(0, H, 2 * H), nru.narrow(0, 0, H)});
  };
  if (needs.x) g.dx = dgx.mm(w.w_ih).view({blk.steps, blk.batch, blk.input});  // [Tb*B, 3H] x [3H, F]
  if (needs.w_ih) g.dw_ih = dgx.t().mm(blk.x2);                                // [3H, Tb*B] x [Tb*B, F]
  if (needs.b_ih) g.db_ih = dgx.sum(0);
  if (needs.w_hh) g.dw_hh = to_run(dgh.t().mm(h_prev_all));                    // [3H, Tb*B] x [Tb*B, H]
  if (needs.b_hh) g.db_hh = to_run(dgh.sum(0));
  return g;
}

// The custom autograd Function. Inputs 0..5 are the differentiable tensors; the mask (an
// optional, so an absent one is no input at all) and the variant are not.
struct GruBlockFunction : public torch::autograd::Function<GruBlockFunction> {
  enum Saved : size_t { kX, kH0, kWih, kWhh, kBih, kBhh, kHs, kA, kB, kC, kMask };

  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& h_entry, const torch::Tensor& w_ih,
                               const torch::Tensor& w_hh, const torch::Tensor& b_ih,
                               const torch::Tensor& b_hh, const c10::optional<torch::Tensor>& mask,
                               int64_t variant_index) {
    const auto variant = static_cast<GruVariant>(variant_index);
    const GruWeights w{w_ih, w_hh, b_ih, b_hh};
    const torch::Tensor mask_2d = mask.has_value() ? *mask : torch::Tensor();  // [Tb, B]
    const BlockInput blk(x, h_entry, mask_2d, w.hidden_size(), /*zero_padding=*/true);
    Activations s;
    switch (variant) {
      case GruVariant::kV1: s = forward_v1(blk, w); break;
      case GruVariant::kV2: s = forward_v2(blk, w); break;
      case GruVariant::kV3: s = forward_v3(blk, w); break;
      case GruVariant::kV4: s = forward_v4(blk, w); break;
    }
    auto z = blk.output(s.hs);                               // [Tb, B, H]
    auto h_exit = s.hs[blk.steps - 1].unsqueeze(0).clone();                      // [1, B, H]
    ctx->saved_data["variant"] = variant_index;
    ctx->save_for_backward({blk.x, h_entry, w_ih, w_hh, b_ih, b_hh, s.hs, s.a, s.b, s.c, mask_2d});
    return {z, h_exit};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto variant = static_cast<GruVariant>(ctx->saved_data["variant"].toInt());
    TORCH_CHECK(!torch::GradMode::is_enabled(), "gru_block (GRU ", to_string(variant),
                "): double backward (create_graph = true) is not supported; the hand-written "
                "backward is not itself differentiable");
    const auto saved = ctx->get_saved_variables();
    const GruWeights w{saved[kWih], saved[kWhh], saved[kBih], saved[kBhh]};
    const BlockInput blk(saved[kX], saved[kH0], saved[kMask], w.hidden_size(), /*zero_padding=*/false);
    const Activations s{saved[kHs], saved[kA], saved[kB], saved[kC]};
    const auto& dz = grad_outputs[0];       // [Tb, B, H]
    const auto& dh_exit = grad_outputs[1];  // [1, B, H]
    GruNeeds needs;
    needs.x = ctx->needs_input_grad(0);
    needs.w_ih = ctx->needs_input_grad(2);
    needs.w_hh = ctx->needs_input_grad(3);
    needs.b_ih = ctx->needs_input_grad(4);
    needs.b_hh = ctx->needs_input_grad(5);
    GruGrads g;
    switch (variant) {
      case GruVariant::kV1:
      case GruVariant::kV2: g = backward_v1_v2(variant, blk, w, s, dz, dh_exit, needs); break;
      case GruVariant::kV3:
      case GruVariant::kV4: g = backward_v3_v4(variant, blk, w, s, dz, dh_exit, needs); break;
    }
    return {g.dx, g.dh0, g.dw_ih, g.dw_hh, g.db_ih, g.db_hh, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor step_mask(const torch::Tensor& lengths, int64_t steps, const torch::Device& device) {
  TORCH_CHECK(lengths.defined() && lengths.dim() == 1, "lengths: expected shape [B], got ",
              lengths.defined() ? lengths.sizes() : torch::IntArrayRef{});
  const auto t = torch::arange(steps, torch::TensorOptions().dtype(torch::kLong).device(device));
  return t.unsqueeze(1) < lengths.to(device, torch::kLong).unsqueeze(0);  // [Tb, B]
}

torch::Tensor block_step_mask(const torch::Tensor& lengths, int64_t batch, int64_t steps,
                              const torch::Device& device) {
  if (!lengths.defined() || batch == 0) return {};
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == batch,
              "lengths: expected shape [B] = [", batch, "], got ", lengths.sizes());
  const auto lengths_cpu = lengths.to(torch::kCPU, torch::kLong);
  const int64_t shortest = lengths_cpu.min().item<int64_t>();
  const int64_t longest = lengths_cpu.max().item<int64_t>();
  TORCH_CHECK(shortest >= 0 && longest <= steps, "lengths: expected values in [0, Tb] = [0, ",
              steps, "], got values in [", shortest, ", ", longest, "]");
  if (shortest == steps) return {};
  return step_mask(lengths_cpu, steps, device);  // [Tb, B]
}

std::pair<torch::Tensor, torch::Tensor> gru_layer(GruVariant variant, const torch::Tensor& x,
                                                  const torch::Tensor& h_entry,
                                                  const GruWeights& weights,
                                                  const torch::Tensor& mask) {
  weights.check("weights");
  const auto mask_arg = check_block_input(x, weights.w_ih, mask);
  check_entry_state(h_entry, "h_entry", x, weights.hidden_size());
  auto out = GruBlockFunction::apply(x, h_entry, weights.w_ih, weights.w_hh, weights.b_ih,
                                     weights.b_hh, mask_arg, static_cast<int64_t>(variant));
  return {out[0], out[1]};
}

}  // namespace vlrnn
