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
};

// Debian's LibTorch calls the system BLAS chosen by update-alternatives; a PyTorch wheel's
// LibTorch carries its own (then vendor is "unknown" unless one is mapped).
BlasInfo detect_blas();

std::string libtorch_version();  // e.g. "1.13.0"
std::string cpu_model();         // /proc/cpuinfo's "model name", or "unknown"
int64_t cpu_count();             // online processors
std::string load_average();      // /proc/loadavg's first three fields, or ""
// "cpu: <model>, N cores, T threads" or "cuda:0: <name>, <memory> GiB".
std::string describe_device(const torch::Device& device);

}  // namespace vlrnn::measure
