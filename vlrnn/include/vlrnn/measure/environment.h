#pragma once
// What a measurement ran on: recorded next to every result set (meta.json), because a
// number without its machine, BLAS and code version cannot be compared with anything.

#include <torch/torch.h>

#include <string>

namespace vlrnn::measure {

struct BlasInfo {
  std::string alternative;  // what /etc/alternatives/libblas.so.3-<arch> resolves to ("" if none)
  std::string loaded;       // the libblas / BLAS library mapped into this process ("" if none)
  std::string vendor;       // "OpenBLAS", "BLIS", "MKL", "ATLAS", "reference", "unknown"
  bool reference = false;   // the slow netlib reference BLAS: measurements are not meaningful
  std::string core;         // OpenBLAS's kernel for this processor, e.g. "SkylakeX" ("" if none)
  std::string faster_core;  // a faster kernel it has for this processor ("" if none)
};

// Debian's LibTorch calls the system BLAS chosen by update-alternatives; a PyTorch wheel's
// LibTorch carries its own (then vendor is "unknown" unless one is mapped).
BlasInfo detect_blas();

// NOTE [ OpenBLAS on a processor it does not know ]: OpenBLAS picks its kernel from the
// processor's family and model, and a release older than the processor falls back to its
// generic SSE kernel, "Prescott", silently: GEMMs run several times slower. Its AVX2 and
// AVX-512 kernels run on any processor with those instructions, and OPENBLAS_CORETYPE
// chooses one when the library loads. So measurements warn, and scripts/test.sh sets it.
// The measurements: docs/platforms.md, "OpenBLAS and the processor".
//
// The rule: the kernel the instruction flags (/proc/cpuinfo's "flags" words) allow —
// "SkylakeX" with AVX-512 F, CD, BW, DQ and VL, "Haswell" with AVX2 and FMA — when `core`
// is a kernel for fewer instructions; "" when `core` is already as fast, or not OpenBLAS's.
std::string faster_openblas_core(const std::string& core, const std::string& cpu_flags);
// One line for a measurement's user when the BLAS makes its times meaningless or slow
// (the reference BLAS, OpenBLAS on its generic kernel); "" when it does not.
std::string blas_warning(const BlasInfo& blas);

std::string libtorch_version();  // e.g. "1.13.0"
std::string cpu_model();         // /proc/cpuinfo's "model name", or "unknown"
int64_t cpu_count();             // online processors
std::string load_average();      // /proc/loadavg's first three fields, or ""
// Whether this library was compiled with its CUDA-only code (VLRNN_WITH_CUDA: timing with
// CUDA events, the caching allocator's peaks, the GPU's description). Without it, a CUDA
// device is refused where it is named, not measured wrongly later.
bool built_with_cuda();
// "cpu: <model>, N cores, T threads" or "cuda:0: <name>, <memory> GiB, compute X.Y, CUDA
// runtime X.Y, cuDNN N, TF32 off".
std::string describe_device(const torch::Device& device);

}  // namespace vlrnn::measure
