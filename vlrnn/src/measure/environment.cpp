#include "vlrnn/measure/environment.h"

#include <torch/version.h>
#include <unistd.h>

#ifdef VLRNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace vlrnn::measure {
namespace {

std::string blas_vendor(const std::string& path) {
  if (path.empty()) return "unknown";
  if (path.find("openblas") != std::string::npos) return "OpenBLAS";
  if (path.find("blis") != std::string::npos) return "BLIS";
  if (path.find("mkl") != std::string::npos) return "MKL";
  if (path.find("atlas") != std::string::npos) return "ATLAS";
  // Debian's reference (netlib) BLAS lives in .../blas/libblas.so.3.
  if (path.find("/blas/libblas") != std::string::npos) return "reference";
  return "unknown";
}

}  // namespace

BlasInfo detect_blas() {
  BlasInfo info;
  namespace fs = std::filesystem;
  for (const char* arch : {"x86_64-linux-gnu", "aarch64-linux-gnu", "powerpc64le-linux-gnu"}) {
    const fs::path link = std::string("/etc/alternatives/libblas.so.3-") + arch;
    std::error_code error;
    if (fs::exists(link, error)) {
      info.alternative = fs::canonical(link, error).string();
      break;
    }
  }
  // The library actually mapped: the kernel names the resolved file in /proc/self/maps.
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = fs::path(path).filename().string();
    if (file.rfind("libblas", 0) == 0 || file.rfind("libopenblas", 0) == 0 ||
        file.rfind("libblis", 0) == 0 || file.rfind("libmkl_core", 0) == 0) {
      info.loaded = path;
      if (file.rfind("libblas", 0) == 0) break;  // the BLAS interface itself: the answer
    }
  }
  info.vendor = blas_vendor(!info.loaded.empty() ? info.loaded : info.alternative);
  info.reference = info.vendor == "reference";
  return info;
}

std::string libtorch_version() { return TORCH_VERSION; }

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(' '));
        return name;
      }
    }
  }
  return "unknown";
}

int64_t cpu_count() { return int64_t(sysconf(_SC_NPROCESSORS_ONLN)); }

std::string load_average() {
  std::ifstream loadavg("/proc/loadavg");
  std::string a, b, c;
  if (!(loadavg >> a >> b >> c)) return "";
  return a + " " + b + " " + c;
}

std::string describe_device(const torch::Device& device) {
#ifdef VLRNN_WITH_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto* props = at::cuda::getDeviceProperties(index);
    return fmt::format("cuda:{}: {}, {:.1f} GiB", int(index), props->name,
                       double(props->totalGlobalMem) / double(1ull << 30));
  }
#endif
  return fmt::format("cpu: {}, {} cores, {} threads", cpu_model(), cpu_count(),
                     at::get_num_threads());
}

}  // namespace vlrnn::measure
