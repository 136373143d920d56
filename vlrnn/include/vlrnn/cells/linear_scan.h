#pragma once
// The linear recurrence h_t = a_t ⊙ h_{t-1} + b_t over a block of steps, computed by one
// kernel call (one pass over memory on the CPU; a handful of whole-block tensor ops
// elsewhere) instead of a loop of Tb small autograd steps, with its backward written by hand
// as the same scan run in reverse. The models that use it are in
// vlrnn/cells/linear_recurrence.h.
// Shapes: Tb = steps in the block, S... = the state's shape (e.g. [B, H]; [B, H, N]).
// a, b [Tb, S...], h0 [S...] -> h [Tb, S...] (h[t] is the state after step t). Real or
// complex dtypes; a complex a gives the LRU's rotating decay.
//
// NOTE [ One pass on the CPU ]
// On the CPU the recurrence is memory-bound: a step does two flops per element of a and b.
// The step loop pays a dispatch, an allocation and an autograd node per step (about 50 µs on
// [32, 256]); the chunked scan below pays Tb/C + C dispatches but streams a, b and its
// products several times, in double. The sequential kernel (ScanKernel::kSequential) reads
// a and b once and writes h once, in a plain loop over steps with the state's elements
// innermost (vectorised by the compiler, split across intra-op threads by element), and its
// backward is the reverse scan in one such pass. It computes the loop's products in the
// loop's order in the model's dtype (bit for bit the loop's values for real dtypes; complex
// products may round as c10::complex does, not as ATen's vectorised ones), so a block method
// and full BPTT get the same bits wherever a block is cut, without widening to double.
//
// NOTE [ A chunked scan that never divides ]
// The block's steps are cut into chunks of C steps (C = ceil(sqrt(Tb)) unless given):
// 1. inside every chunk at once, a scan from a zero entry state, local_j = a_j local_{j-1}
//    + b_j, and the running product P_j = a_0 ⋯ a_j (C sequential ops, each over all chunks);
// 2. the chunks' entry states in turn: e_{c+1} = P_{C-1}(c) e_c + local_{C-1}(c) (Tb / C ops);
// 3. h = local + P ⊙ e, one op over the whole block.
// That is C + Tb/C sequential ops where the loop has Tb. Nothing is divided by a product of a
// (the "cumulative" form h_t = P_t Σ b_s / P_s underflows, then blows up, when some |a| is
// small), and with |a| <= 1, as in every model here, every intermediate is bounded by the
// loop's values. The scan rounds differently from the loop, not more coarsely: they agree to
// a few ulps (tests/cells/test_linear_scan.cpp).
//
// NOTE [ The scan accumulates in double ]
// Where the chunks fall depends on where the block starts, and forward() is not told (NOTE
// [ The RecurrentModule contract ]): a block method and full BPTT sum the same products in
// different orders. In float64 that is a few ulps; in float32 it reached 1.1e-5 relative on a
// 3-layer SSM's weight gradient, past the verifier's 1e-5, so exactness would depend on the
// cut. The chunked scan therefore runs both scans (forward and reverse) in double (complex double)
// and rounds h once at the end: every h_t is then the float32 rounding of nearly the same
// double, wherever the cut. The cost is the scan's elementwise ops at twice the width; the
// GEMMs that feed a and b stay in the model's dtype.
//
// NOTE [ The reverse scan ]
// The backward of h_t = a_t h_{t-1} + b_t, with g_t = dL/dh_t in full (from the output and
// from step t+1), is the same recurrence run backwards:
//   g_t = δ_t + conj(a_{t+1}) g_{t+1}     (δ_t = the incoming gradient of h_t)
//   db_t = g_t,   da_t = g_t ⊙ conj(h_{t-1}),   dh0 = conj(a_0) g_0
// so the backward is one linear_scan over the flipped block plus two elementwise products
// (conj is the identity for real tensors; for complex ones it is PyTorch's convention for
// the gradient of a holomorphic product). Saved for it: a, h0 and the output h.

#include <torch/torch.h>

#include <string>

namespace vlrnn {

// How a linear-recurrence model runs its recurrence: the scan above, or the plain step loop
// (autograd through Tb small steps), kept as the reference the scan is checked against.
enum class RecurrenceForm { kScan, kLoop };
std::string to_string(RecurrenceForm form);         // "scan", "loop"
RecurrenceForm recurrence_form_from_string(const std::string& name);  // throws on others

// How linear_scan computes: kSequential (CPU only: NOTE [ One pass on the CPU ]), kChunked
// (any device: NOTE [ A chunked scan that never divides ]), kAuto = the first on the CPU,
// the second elsewhere.
enum class ScanKernel { kAuto, kSequential, kChunked };

// The scan; differentiable in a, b and h0 through the reverse scan (NOTE [ The reverse
// scan ]). `chunk` = C of the chunked kernel, 0 = ceil(sqrt(Tb)).
torch::Tensor linear_scan(const torch::Tensor& a, const torch::Tensor& b,
                          const torch::Tensor& h0, ScanKernel kernel = ScanKernel::kAuto,
                          int64_t chunk = 0);

// The same recurrence as a plain step loop, differentiated by autograd step by step.
torch::Tensor linear_scan_loop(const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& h0);

// Either of the two, by `form`.
torch::Tensor linear_recurrence(RecurrenceForm form, const torch::Tensor& a,
                                const torch::Tensor& b, const torch::Tensor& h0);

}  // namespace vlrnn
