#include "vlrnn/cells/lstm_layer.h"

// Shape legend (vlrnn/core/shapes.h): Tb = steps in the block, B = batch, F = input features,
// H = hidden size. Gate order (i, f, g, o), LibTorch's (vlrnn/cells/lstm_layer.h).
//
// GEMMs run through LibTorch (the system BLAS) on column slices and views of block buffers;
// the elementwise gate work runs as fused loops over rows (at::parallel_for) between the
// vectorised σ / tanh passes of LibTorch, so each step makes a handful of passes over [B, 4H].

#include "block_common.h"
#include "vlrnn/cells/block_rnn.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <utility>

namespace vlrnn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of [B, H] per parallel task: about 16k elements each.
int64_t row_grain(int64_t hidden) { return std::max<int64_t>(1, 16384 / hidden); }

// σ on i, f, o and tanh on g: gates [B, 4H] = activations of a [B, 4H] (may be the same).
void activate(torch::Tensor& gates, const torch::Tensor& a, int64_t hidden) {
  const int64_t H = hidden;
  auto if_out = gates.narrow(1, 0, 2 * H), g_out = gates.narrow(1, 2 * H, H),
       o_out = gates.narrow(1, 3 * H, H);
  at::sigmoid_out(if_out, a.narrow(1, 0, 2 * H));
  at::tanh_out(g_out, a.narrow(1, 2 * H, H));
  at::sigmoid_out(o_out, a.narrow(1, 3 * H, H));
}

// NOTE [ lstm_block off the CPU ]: the gate work of a step is fused into loops over rows on
// the CPU (data_ptr and at::parallel_for: host memory only). Elsewhere (CUDA) the same
// arithmetic runs as LibTorch's elementwise ops, a few kernels per step, and the GEMMs are
// the same calls either way. The two compute the same function; a test runs the ops on the
// CPU against the loops (set_lstm_layer_cpu_loops_for_testing).
bool& cpu_loops_enabled() {
  static bool enabled = true;
  return enabled;
}
bool cpu_loops(const torch::Tensor& x) { return x.device().is_cpu() && cpu_loops_enabled(); }

// c_t = f ⊙ c + i ⊙ g and h_t = o ⊙ tanh(c_t), both frozen past a sequence's end, for
// gates [B, 4H] (activated), c, h, c_t, h_t, tc [B, H]; `mask` the step's B flags or null.
void state_update_cpu(const torch::Tensor& gates, const torch::Tensor& c, const torch::Tensor& h,
                      torch::Tensor& c_t, torch::Tensor& h_t, torch::Tensor& tc, const bool* m,
                      int64_t B, int64_t H) {
  AT_DISPATCH_FLOATING_TYPES(gates.scalar_type(), "lstm_block forward", [&] {
    const scalar_t* G = gates.data_ptr<scalar_t>();
    const scalar_t* cp = c.data_ptr<scalar_t>();
    scalar_t* cn = c_t.data_ptr<scalar_t>();
    at::parallel_for(0, B, row_grain(H), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const scalar_t* gi = G + b * 4 * H;
        const scalar_t *gf = gi + H, *gg = gi + 2 * H;
        if (m && !m[b]) {
          std::copy(cp + b * H, cp + (b + 1) * H, cn + b * H);
          continue;
        }
        for (int64_t j = 0; j < H; ++j) cn[b * H + j] = gf[j] * cp[b * H + j] + gi[j] * gg[j];
      }
    });
    at::tanh_out(tc, c_t);
    const scalar_t* T = tc.data_ptr<scalar_t>();
    const scalar_t* hp = h.data_ptr<scalar_t>();
    scalar_t* hn = h_t.data_ptr<scalar_t>();
    at::parallel_for(0, B, row_grain(H), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        if (m && !m[b]) {
          std::copy(hp + b * H, hp + (b + 1) * H, hn + b * H);
          continue;
        }
        const scalar_t* go = G + b * 4 * H + 3 * H;
        for (int64_t j = 0; j < H; ++j) hn[b * H + j] = go[j] * T[b * H + j];
      }
    });
  });
}

// The same as LibTorch ops on any device; `mask_t` [B, 1] bool or undefined.
void state_update_ops(const torch::Tensor& gates, const torch::Tensor& c, const torch::Tensor& h,
                      torch::Tensor& c_t, torch::Tensor& h_t, torch::Tensor& tc,
                      const torch::Tensor& mask_t, int64_t H) {
  const auto i = gates.narrow(1, 0, H), f = gates.narrow(1, H, H), g = gates.narrow(1, 2 * H, H),
             o = gates.narrow(1, 3 * H, H);
  at::mul_out(c_t, f, c);
  c_t.addcmul_(i, g);
  if (mask_t.defined()) at::where_out(c_t, mask_t, c_t, c);
  at::tanh_out(tc, c_t);
  at::mul_out(h_t, o, tc);
  if (mask_t.defined()) at::where_out(h_t, mask_t, h_t, h);
}

// ---- forward ------------------------------------------------------------------------------

struct Forward {
  torch::Tensor hs;  // [Tb, B, H] h_1 .. h_Tb
  torch::Tensor cs;  // [Tb, B, H] c_1 .. c_Tb
  torch::Tensor a;   // [Tb, B, 4H] gates (kGates) or pre-activations (kPreactivations)
};

Forward lstm_block_forward(const BlockInput& blk, const torch::Tensor& c0, const LstmWeights& w,
                           LstmSave save) {
  const int64_t H = blk.hidden, B = blk.batch;
  const auto opts = blk.x.options();
  Forward s;
  s.hs = torch::empty({blk.steps, B, H}, opts);
  s.cs = torch::empty({blk.steps, B, H}, opts);
  // [Tb*B, F] x [F, 4H]: every step's input projection, both biases folded in.
  s.a = torch::addmm(w.b_ih + w.b_hh, blk.x2, w.w_ih.t()).view({blk.steps, B, 4 * H});
  auto scratch = save == LstmSave::kPreactivations ? torch::empty({B, 4 * H}, opts)
                                                   : torch::Tensor();  // [B, 4H] gates
  auto tc = torch::empty({B, H}, opts);                                // [B, H] tanh(c_t)
  const bool* mask = blk.mask.defined() && cpu_loops(blk.x) ? blk.mask.data_ptr<bool>()
                                                            : nullptr;  // [Tb, B]
  torch::Tensor h = blk.h0, c = c0;  // [B, H]
  for (int64_t t = 0; t < blk.steps; ++t) {
    auto a_t = s.a[t];  // [B, 4H]
    a_t.addmm_(h, w.w_hh.t());  // + h_{t-1} W_hh^T: [B, H] x [H, 4H]
    auto gates = save == LstmSave::kGates ? a_t : scratch;
    activate(gates, a_t, H);
    auto c_t = s.cs[t], h_t = s.hs[t];
    if (cpu_loops(blk.x)) {
      state_update_cpu(gates, c, h, c_t, h_t, tc, mask ? mask + t * B : nullptr, B, H);
    } else {
      const auto mask_t = blk.mask.defined() ? blk.mask[t] : torch::Tensor();  // [B, 1]
      state_update_ops(gates, c, h, c_t, h_t, tc, mask_t, H);
    }
    h = h_t;
    c = c_t;
  }
  return s;
}

// ---- backward (the forward in reverse) ----------------------------------------------------

struct LstmGrads {
  torch::Tensor dx;                          // [Tb, B, F]
  torch::Tensor dh0, dc0;                    // [1, B, H]
  torch::Tensor dw_ih, dw_hh, db_ih, db_hh;  // [4H, F], [4H, H], [4H], [4H]
};

struct LstmNeeds {
  bool x = true, w_ih = true, w_hh = true, b_ih = true, b_hh = true;
};

// Steps per chunk of backward: D of a chunk holds at most 4M numbers (16 MB in float32), so
// that the allocator hands the same memory back chunk after chunk (larger buffers are fresh
// pages every time: page faults and zeroing cost more than the GEMMs gain from K beyond
// ~1000 rows), while each weight-gradient GEMM still has K = chunk steps x B >= ~1000 rows.
int64_t backward_chunk_steps(int64_t batch, int64_t hidden) {
  return std::max<int64_t>(1, (int64_t(1) << 22) / (4 * hidden * std::max<int64_t>(1, batch)));
}

// The running state of the backward between steps.
struct BackwardCarry {
  torch::Tensor dh;       // [B, H] δh_t (from t+1)
  torch::Tensor dh_prev;  // [B, H] δh_{t-1}, written by the step
  torch::Tensor dc;       // [B, H] δc_t, updated in place to δc_{t-1}
  torch::Tensor tc;       // [B, H] tanh(c_t), scratch
  torch::Tensor gates;    // [B, 4H] scratch for the activated gates (pre-activation saves)
};

// D_t [B, 4H] = δa_t from δh_t (carry.dh) + δz_t and δc_t (carry.dc), which becomes
// δc_{t-1} in place; tanh(c_t) is in carry.tc. A frozen step (`m` false) has D_t = 0 and
// passes δc_t through. `m` the step's B flags or null.
void gate_gradients_cpu(const torch::Tensor& gates, BackwardCarry& carry,
                        const torch::Tensor& c_prev, const torch::Tensor& dz, int64_t t,
                        torch::Tensor& d_t, const bool* m, int64_t B, int64_t H) {
  AT_DISPATCH_FLOATING_TYPES(gates.scalar_type(), "lstm_block backward", [&] {
    const scalar_t* G = gates.data_ptr<scalar_t>();
    const scalar_t* T = carry.tc.data_ptr<scalar_t>();
    const scalar_t* cp = c_prev.data_ptr<scalar_t>();
    const scalar_t* dzt = dz.data_ptr<scalar_t>() + t * B * H;
    const scalar_t* dhn = carry.dh.data_ptr<scalar_t>();
    scalar_t* dcb = carry.dc.data_ptr<scalar_t>();
    scalar_t* D = d_t.data_ptr<scalar_t>();
    at::parallel_for(0, B, row_grain(H), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        scalar_t* Db = D + b * 4 * H;
        if (m && !m[b]) {  // frozen: no gate gradient, δc_t passes through
          std::fill(Db, Db + 4 * H, scalar_t(0));
          continue;
        }
        const scalar_t* gb = G + b * 4 * H;
        for (int64_t j = 0; j < H; ++j) {
          const int64_t k = b * H + j;
          const scalar_t i = gb[j], f = gb[H + j], g = gb[2 * H + j], o = gb[3 * H + j];
          const scalar_t th = T[k];
          const scalar_t dh_t = dhn[k] + dzt[k];                    // δh_t += δz_t
          const scalar_t dc_t = dcb[k] + dh_t * o * (1 - th * th);  // h_t = o ⊙ tanh(c_t)
          Db[j] = dc_t * g * i * (1 - i);                           // δa_i
          Db[H + j] = dc_t * cp[k] * f * (1 - f);                   // δa_f
          Db[2 * H + j] = dc_t * i * (1 - g * g);                   // δa_g
          Db[3 * H + j] = dh_t * th * o * (1 - o);                  // δa_o
          dcb[k] = dc_t * f;                                        // δc_{t-1}
        }
      }
    });
  });
}

// The same as LibTorch ops on any device; `mask_t` [B, 1] bool or undefined.
void gate_gradients_ops(const torch::Tensor& gates, BackwardCarry& carry,
                        const torch::Tensor& c_prev, const torch::Tensor& dz_t, torch::Tensor& d_t,
                        const torch::Tensor& mask_t, int64_t H) {
  const auto i = gates.narrow(1, 0, H), f = gates.narrow(1, H, H), g = gates.narrow(1, 2 * H, H),
             o = gates.narrow(1, 3 * H, H);
  const auto& th = carry.tc;
  const auto dh_t = carry.dh + dz_t;                      // δh_t += δz_t
  const auto dc_t = carry.dc + dh_t * o * (1 - th * th);  // h_t = o ⊙ tanh(c_t)
  auto d_i = d_t.narrow(1, 0, H), d_f = d_t.narrow(1, H, H), d_g = d_t.narrow(1, 2 * H, H),
       d_o = d_t.narrow(1, 3 * H, H);
  at::mul_out(d_i, dc_t * g, i * (1 - i));       // δa_i
  at::mul_out(d_f, dc_t * c_prev, f * (1 - f));  // δa_f
  at::mul_out(d_g, dc_t * i, 1 - g * g);         // δa_g
  at::mul_out(d_o, dh_t * th, o * (1 - o));      // δa_o
  if (mask_t.defined()) {  // frozen: no gate gradient, δc_t passes through
    d_t.masked_fill_(mask_t.logical_not(), 0);
    at::where_out(carry.dc, mask_t, dc_t * f, carry.dc);
  } else {
    at::mul_out(carry.dc, dc_t, f);  // δc_{t-1}
  }
}

// Step t of the backward (the forward step in reverse): fills D_t [B, 4H] = δa_t from δh_t
// + δz_t and δc_t, turns δc_t into δc_{t-1}, and leaves δh_{t-1} = D_t W_hh in carry.dh.
void backward_step(const BlockInput& blk, const torch::Tensor& c0, const LstmWeights& w,
                   const Forward& s, LstmSave save, const torch::Tensor& dz, int64_t t,
                   BackwardCarry& carry, torch::Tensor d_t) {
  const int64_t H = blk.hidden, B = blk.batch;
  const auto c_t = s.cs[t];                      // [B, H]
  const auto c_prev = t > 0 ? s.cs[t - 1] : c0;  // [B, H]
  at::tanh_out(carry.tc, c_t);
  torch::Tensor gates = s.a[t];  // [B, 4H]
  if (save == LstmSave::kPreactivations) {
    activate(carry.gates, gates, H);
    gates = carry.gates;
  }
  if (cpu_loops(blk.x)) {
    const bool* mask = blk.mask.defined() ? blk.mask.data_ptr<bool>() + t * B : nullptr;
    gate_gradients_cpu(gates, carry, c_prev, dz, t, d_t, mask, B, H);
  } else {
    const auto mask_t = blk.mask.defined() ? blk.mask[t] : torch::Tensor();  // [B, 1]
    gate_gradients_ops(gates, carry, c_prev, dz[t], d_t, mask_t, H);
  }
  // a_t = ... + h_{t-1} W_hh^T: δh_{t-1} = D_t W_hh, [B, 4H] x [4H, H]
  at::mm_out(carry.dh_prev, d_t, w.w_hh);
  if (blk.mask.defined()) {
    // A frozen step passes δh_t straight through (z_t = 0 there: no δz_t to add).
    const auto frozen = blk.mask[t].logical_not();  // [B, 1]
    at::where_out(carry.dh_prev, frozen, carry.dh, carry.dh_prev);
  }
  std::swap(carry.dh, carry.dh_prev);
}

// The weight and input gradients of steps t0 .. t0+n-1 from their gate gradients d
// [n, B, 4H]: one GEMM each over the chunk's n*B rows (NOTE [ lstm_block backward in
// chunks ]). db accumulates Σ D.
void chunk_gradients(const BlockInput& blk, const LstmWeights& w, const Forward& s,
                     const torch::Tensor& d, int64_t t0, const LstmNeeds& needs, LstmGrads& g,
                     torch::Tensor& db) {
  const int64_t H = blk.hidden, B = blk.batch, F = blk.input, n = d.size(0);
  const auto d2 = d.view({n * B, 4 * H});  // [n*B, 4H]
  if (needs.x) {
    auto dx_c = g.dx.narrow(0, t0, n).view({n * B, F});
    at::mm_out(dx_c, d2, w.w_ih);  // [n*B, 4H] x [4H, F]
  }
  if (needs.w_ih) g.dw_ih.addmm_(d2.t(), blk.x2.narrow(0, t0 * B, n * B));  // [4H, n*B] x [n*B, F]
  if (needs.w_hh) {
    // h_{t0-1} .. h_{t1-2}: a view of hs. The first chunk starts at h_0, which is not in hs:
    // its step gets a GEMM of its own rather than a copy of the chunk's states with h_0 in
    // front (that copy, n*B*H, made the backward's peak depend on where the chunks fall).
    if (t0 > 0) {
      g.dw_hh.addmm_(d2.t(), s.hs.narrow(0, t0 - 1, n).view({n * B, H}));  // [4H, n*B] x [n*B, H]
    } else {
      g.dw_hh.addmm_(d[0].t(), blk.h0);  // [4H, B] x [B, H]
      if (n > 1) {
        g.dw_hh.addmm_(d2.narrow(0, B, (n - 1) * B).t(),
                       s.hs.narrow(0, 0, n - 1).view({(n - 1) * B, H}));
      }
    }
  }
  if (needs.b_ih || needs.b_hh) db.add_(d2.sum(0));
}

// NOTE [ lstm_block backward in chunks ]: the steps are walked from last to first in chunks
// of backward_chunk_steps(); within a chunk, the per-step work (forward in reverse) fills the
// chunk's gate gradients D_c [n, B, 4H]; then the chunk's share of every weight gradient is
// one GEMM over its n*B rows, accumulated: dW_hh += D_c^T [h_{t0-1} .. h_{t0+n-2}],
// dW_ih += D_c^T x_c, db += Σ D_c, and dx_c = D_c W_ih.
LstmGrads lstm_block_backward(const BlockInput& blk, const torch::Tensor& c0, const LstmWeights& w,
                              const Forward& s, LstmSave save, const torch::Tensor& dz_in,
                              const torch::Tensor& dh_exit, const torch::Tensor& dc_exit,
                              const LstmNeeds& needs) {
  const int64_t H = blk.hidden, B = blk.batch, F = blk.input;
  const auto opts = blk.x.options();
  const auto dz = dz_in.contiguous();                                    // [Tb, B, H]
  const int64_t chunk = std::min(blk.steps, backward_chunk_steps(B, H));
  auto d_buffer = torch::empty({chunk, B, 4 * H}, opts);                 // [n, B, 4H] D_c
  BackwardCarry carry;
  carry.dh = dh_exit.select(0, 0).clone(at::MemoryFormat::Contiguous);   // [B, H]
  carry.dh_prev = torch::empty_like(carry.dh);                           // [B, H]
  carry.dc = dc_exit.select(0, 0).clone(at::MemoryFormat::Contiguous);   // [B, H]
  carry.tc = torch::empty({B, H}, opts);                                 // [B, H]
  if (save == LstmSave::kPreactivations) carry.gates = torch::empty({B, 4 * H}, opts);
  LstmGrads g;
  if (needs.x) g.dx = torch::empty({blk.steps, B, F}, opts);             // [Tb, B, F]
  if (needs.w_ih) g.dw_ih = torch::zeros({4 * H, F}, opts);              // [4H, F]
  if (needs.w_hh) g.dw_hh = torch::zeros({4 * H, H}, opts);              // [4H, H]
  auto db = torch::zeros({4 * H}, opts);                                 // [4H]
  for (int64_t t1 = blk.steps; t1 > 0; t1 -= chunk) {
    const int64_t t0 = std::max<int64_t>(0, t1 - chunk), n = t1 - t0;  // steps t0 .. t1-1
    auto d = d_buffer.narrow(0, 0, n);                                   // [n, B, 4H]
    for (int64_t t = t1 - 1; t >= t0; --t) {
      backward_step(blk, c0, w, s, save, dz, t, carry, d[t - t0]);
    }
    chunk_gradients(blk, w, s, d, t0, needs, g, db);
  }
  g.dh0 = carry.dh.unsqueeze(0);
  g.dc0 = carry.dc.unsqueeze(0);
  if (needs.b_ih) g.db_ih = db;
  if (needs.b_hh) g.db_hh = needs.b_ih ? db.clone() : db;
  return g;
}

// The custom autograd Function. Inputs 0..6 are the differentiable tensors; the mask (an
// optional) and the save mode are not.
struct LstmBlockFunction : public torch::autograd::Function<LstmBlockFunction> {
  enum Saved : size_t { kX, kH0, kC0, kWih, kWhh, kBih, kBhh, kHs, kCs, kA, kMask };

  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& h_entry, const torch::Tensor& c_entry,
                               const torch::Tensor& w_ih, const torch::Tensor& w_hh,
                               const torch::Tensor& b_ih, const torch::Tensor& b_hh,
                               const c10::optional<torch::Tensor>& mask, int64_t save_index) {
    const auto save = static_cast<LstmSave>(save_index);
    const LstmWeights w{w_ih, w_hh, b_ih, b_hh};
    const torch::Tensor mask_2d = mask.has_value() ? *mask : torch::Tensor();  // [Tb, B]
    const BlockInput blk(x, h_entry, mask_2d, w.hidden_size(), /*zero_padding=*/true);
    const auto c0 = c_entry.select(0, 0).contiguous();  // [B, H]
    auto s = lstm_block_forward(blk, c0, w, save);
    auto z = blk.output(s.hs);                                    // [Tb, B, H]
    auto h_exit = s.hs[blk.steps - 1].unsqueeze(0).clone();                      // [1, B, H]
    auto c_exit = s.cs[blk.steps - 1].unsqueeze(0).clone();                      // [1, B, H]
    ctx->saved_data["save"] = save_index;
    ctx->save_for_backward(
        {blk.x, h_entry, c_entry, w_ih, w_hh, b_ih, b_hh, s.hs, s.cs, s.a, mask_2d});
    return {z, h_exit, c_exit};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!torch::GradMode::is_enabled(),
                "lstm_block: double backward (create_graph = true) is not supported; the "
                "hand-written backward is not itself differentiable");
    const auto save = static_cast<LstmSave>(ctx->saved_data["save"].toInt());
    const auto saved = ctx->get_saved_variables();
    const LstmWeights w{saved[kWih], saved[kWhh], saved[kBih], saved[kBhh]};
    const BlockInput blk(saved[kX], saved[kH0], saved[kMask], w.hidden_size(),
                         /*zero_padding=*/false);
    const Forward s{saved[kHs], saved[kCs], saved[kA]};
    const auto c0 = saved[kC0].select(0, 0).contiguous();  // [B, H]
    LstmNeeds needs;
    needs.x = ctx->needs_input_grad(0);
    needs.w_ih = ctx->needs_input_grad(3);
    needs.w_hh = ctx->needs_input_grad(4);
    needs.b_ih = ctx->needs_input_grad(5);
    needs.b_hh = ctx->needs_input_grad(6);
    const auto g = lstm_block_backward(blk, c0, w, s, save, grad_outputs[0], grad_outputs[1],
                                       grad_outputs[2], needs);
    return {g.dx,    g.dh0,   g.dc0,   g.dw_ih,         g.dw_hh,
            g.db_ih, g.db_hh, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void LstmWeights::check(const std::string& argument) const {
  check_layer_weights(w_ih, w_hh, b_ih, b_hh, /*gates=*/4, argument);
}

void set_lstm_layer_cpu_loops_for_testing(bool enabled) { cpu_loops_enabled() = enabled; }

std::string to_string(LstmSave save) {
  return save == LstmSave::kGates ? "gates" : "preactivations";
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> lstm_layer(
    const torch::Tensor& x, const torch::Tensor& h_entry, const torch::Tensor& c_entry,
    const LstmWeights& weights, const torch::Tensor& mask, LstmSave save) {
  weights.check("weights");
  const auto mask_arg = check_block_input(x, weights.w_ih, mask);
  TORCH_CHECK(x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble,
              "x: expected dtype Float or Double, got ", x.scalar_type());
  check_entry_state(h_entry, "h_entry", x, weights.hidden_size());
  check_entry_state(c_entry, "c_entry", x, weights.hidden_size());
  auto out = LstmBlockFunction::apply(x, h_entry, c_entry, weights.w_ih, weights.w_hh,
                                      weights.b_ih, weights.b_hh, mask_arg,
                                      static_cast<int64_t>(save));
  return {out[0], out[1], out[2]};
}

}  // namespace vlrnn
