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

#include <string>

namespace vlrnn::measure {

struct ThreadSettings {
  int torch_threads = 0;  // LibTorch intra-op threads
  int blas_threads = -1;  // the BLAS's own threads; -1 when the BLAS exposes no control
  std::string blas_control;  // the function that set / read it, e.g. "openblas_set_num_threads"
};

// Sets LibTorch's intra-op threads to `torch_threads` (>= 1) and the BLAS's threads to
// `blas_threads` (>= 1, or 0 for every online core). Throws naming the argument when a count
// is negative or zero where 0 has no meaning. A BLAS without a thread control (the reference
// BLAS) is left alone: blas_threads is then -1 in the result.
ThreadSettings apply_thread_policy(int torch_threads = 1, int blas_threads = 0);

// What the process runs with now.
ThreadSettings current_threads();

}  // namespace vlrnn::measure
