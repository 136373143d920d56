#pragma once
// How many threads a measurement runs on: LibTorch's intra-op pool and the BLAS's own pool.
//
// NOTE [ Thread policy ]: Debian's LibTorch hands every GEMM to the system BLAS, and
// OpenBLAS (libopenblas0-pthread) runs its own thread pool beside LibTorch's intra-op pool.
// With both pools as wide as the machine, they fight over the cores: on a 2-core machine,
// full BPTT of an LSTM (H=256 B=16 T=4000) took 13.4 s with 2 intra-op threads and 3.97 s
// with 1. The default policy is therefore one intra-op thread for LibTorch's own kernels
// (elementwise work, the cells' fused loops) and every core for the BLAS, where the
// FLOPs are. Both are flags of every measuring command (--threads, --blas-threads), and
// both counts are written to meta.json.
//
// NOTE [ Two pools never share the cores ]: the fight is worst where LibTorch's pool does
// real work between GEMMs, as it does on PyTorch 2.x, where oneDNN's LSTM layer runs on it:
// OpenBLAS's pthreads workers spin for a while after each call and keep the cores from it,
// and a loop that alternates between the two, as blockwise methods do, loses several times
// its time. So on LibTorch 2 and later a BLAS thread count of 0 means the cores LibTorch's
// pool leaves (cores / intra-op threads, at least 1), and thread_pools_warning() names the
// fight for a process whose counts someone else set (Python warns with it). On 1.x, whose
// LSTM runs on the BLAS, two full-width pools measured fastest, so the BLAS keeps every
// core there. The measurements: docs/platforms.md, "Threads".

#include <torch/version.h>

#include <cstdint>
#include <string>

namespace vlrnn::measure {

struct ThreadSettings {
  int torch_threads = 0;  // LibTorch intra-op threads
  int blas_threads = -1;  // the BLAS's own threads; -1 when the BLAS exposes no control
  std::string blas_control;  // the function that set / read it, e.g. "openblas_set_num_threads"
  bool blas_own_pool = false;  // the BLAS runs threads of its own (OpenBLAS built on pthreads),
                               // not LibTorch's OpenMP ones
};

// Sets LibTorch's intra-op threads to `torch_threads` (>= 1) and the BLAS's threads to
// `blas_threads` (>= 1, or 0 for the cores LibTorch's pool leaves: NOTE [ Two pools never
// share the cores ]). Throws naming the argument when a count is negative or zero where 0 has
// no meaning. A BLAS without a thread control (the reference BLAS) is left alone:
// blas_threads is then -1 in the result.
ThreadSettings apply_thread_policy(int torch_threads = 1, int blas_threads = 0);

// Whether the two pools fight when together wider than the cores: on LibTorch 2 and later.
constexpr bool kPoolsFight = TORCH_VERSION_MAJOR >= 2;

// The BLAS threads that `blas_threads` = 0 means beside `torch_threads` on `cores`.
int default_blas_threads(int torch_threads, int64_t cores, bool pools_fight = kPoolsFight);

// What the process runs with now.
ThreadSettings current_threads();

// One line when `settings` has LibTorch's pool and a BLAS pool of its own both wider than one
// thread, and their product beyond `cores` (NOTE [ Two pools never share the cores ]); ""
// otherwise.
std::string pools_contend(const ThreadSettings& settings, int64_t cores);
// pools_contend() for this process, where the pools fight (kPoolsFight); "" elsewhere.
std::string thread_pools_warning();

}  // namespace vlrnn::measure
