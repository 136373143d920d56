#include "vlrnn/measure/environment.h"

#include "vlrnn/core/device.h"

#include <torch/version.h>
#include <dlfcn.h>
#include <unistd.h>

#ifdef VLRNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

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

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return text;
}

// OpenBLAS's x86-64 kernels by the widest vector instructions they use: 2 = AVX-512,
// 1 = AVX2, 0 = older; -1 for a name that is not one of its x86-64 kernels.
int openblas_kernel_level(const std::string& core) {
  static const std::set<std::string> avx512 = {"skylakex", "cooperlake", "sapphirerapids"};
  static const std::set<std::string> avx2 = {"haswell", "zen"};
  static const std::set<std::string> older = {
      "katmai",   "coppermine", "northwood",  "prescott",    "banias",    "atom",
      "core2",    "penryn",     "dunnington", "nehalem",     "sandybridge", "athlon",
      "opteron",  "opteron_sse3", "barcelona", "bobcat",     "bulldozer", "piledriver",
      "steamroller", "excavator", "nano"};
  const auto name = lowercase(core);
  if (avx512.count(name)) return 2;
  if (avx2.count(name)) return 1;
  if (older.count(name)) return 0;
  return -1;
}

// The value of /proc/cpuinfo's first `field` line (its first processor's), or "".
std::string cpuinfo_field(const std::string& field) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind(field, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    return value;
  }
  return "";
}

// The kernel OpenBLAS chose at load, when OpenBLAS is what LibTorch calls.
std::string openblas_core() {
  using CoreName = char* (*)();
  auto name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* core = name ? name() : nullptr;
  return core ? std::string(core) : std::string();
}

}  // namespace

std::string faster_openblas_core(const std::string& core, const std::string& cpu_flags) {
  const int level = openblas_kernel_level(core);
  if (level < 0) return "";
  std::set<std::string> flags;
  std::istringstream words(cpu_flags);
  for (std::string word; words >> word;) flags.insert(word);
  const auto has_all = [&flags](std::initializer_list<const char*> wanted) {
    return std::all_of(wanted.begin(), wanted.end(),
                       [&flags](const char* flag) { return flags.count(flag) > 0; });
  };
  if (level < 2 && has_all({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})) {
    return "SkylakeX";
  }
  if (level < 1 && has_all({"avx2", "fma"})) return "Haswell";
  return "";
}

std::string blas_warning(const BlasInfo& blas) {
  if (blas.reference) {
    return fmt::format("LibTorch runs on the reference BLAS ({}): times and utilization are not "
                       "meaningful; install libopenblas0-pthread", blas.loaded);
  }
  if (!blas.faster_core.empty()) {
    return fmt::format("OpenBLAS runs its \"{}\" kernel, for older processors than this one: "
                       "GEMMs run several times slower; set OPENBLAS_CORETYPE={} before starting "
                       "(docs/platforms.md, \"OpenBLAS and the processor\")",
                       blas.core, blas.faster_core);
  }
  return "";
}

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
  info.core = openblas_core();
  info.faster_core = faster_openblas_core(info.core, cpuinfo_field("flags"));
  return info;
}

std::string libtorch_version() { return TORCH_VERSION; }

std::string cpu_model() {
  const auto name = cpuinfo_field("model name");
  return name.empty() ? "unknown" : name;
}

int64_t cpu_count() { return int64_t(sysconf(_SC_NPROCESSORS_ONLN)); }

std::string load_average() {
  std::ifstream loadavg("/proc/loadavg");
  std::string a, b, c;
  if (!(loadavg >> a >> b >> c)) return "";
  return a + " " + b + " " + c;
}

bool built_with_cuda() {
#ifdef VLRNN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string describe_device(const torch::Device& device) {
#ifdef VLRNN_WITH_CUDA
  if (device.is_cuda()) {
    const auto index = resolved_device(device).index();
    const auto* props = at::cuda::getDeviceProperties(index);
    // The versions a GPU result depends on, beside torch's (environment_json): the CUDA
    // runtime LibTorch was built with (13000 = 13.0) and cuDNN's number as cuDNN spells it.
    const long runtime = at::Context::versionCUDART();
    const std::string cudnn =
        at::Context::hasCuDNN() ? std::to_string(at::Context::versionCuDNN()) : "none";
    // And whether float32 ran as TF32 there (NOTE [ Float32 without TF32 ]).
    const bool tf32 = at::globalContext().allowTF32CuDNN() || at::globalContext().allowTF32CuBLAS();
    return fmt::format("cuda:{}: {}, {:.1f} GiB, compute {}.{}, CUDA runtime {}.{}, cuDNN {}, "
                       "TF32 {}",
                       int(index), props->name, double(props->totalGlobalMem) / double(1ull << 30),
                       props->major, props->minor, runtime / 1000, (runtime % 1000) / 10, cudnn,
                       tf32 ? "on" : "off");
  }
#endif
  return fmt::format("cpu: {}, {} cores, {} threads", cpu_model(), cpu_count(),
                     at::get_num_threads());
}

}  // namespace vlrnn::measure
