#include "vlrnn/measure/threads.h"

#include "vlrnn/measure/environment.h"

#include <torch/torch.h>

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>

namespace vlrnn::measure {
namespace {

// The BLAS's thread control, found at run time: LibTorch links whichever libblas.so.3 the
// system chose, so the symbols exist only when that BLAS is OpenBLAS (or BLIS).
struct BlasThreadControl {
  using Set = void (*)(int);
  using Get = int (*)();
  Set set = nullptr;
  Get get = nullptr;
  std::string name;
  bool own_pool = false;  // OpenBLAS on pthreads (openblas_get_parallel() == 1; 2 is OpenMP)
};

BlasThreadControl find_blas_control() {
  BlasThreadControl c;
  if (auto set = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) {
    c.set = reinterpret_cast<BlasThreadControl::Set>(set);
    c.get = reinterpret_cast<BlasThreadControl::Get>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    c.name = "openblas_set_num_threads";
    auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    c.own_pool = parallel && parallel() == 1;
  } else if (auto set = dlsym(RTLD_DEFAULT, "bli_thread_set_num_threads")) {
    c.set = reinterpret_cast<BlasThreadControl::Set>(set);
    c.get = reinterpret_cast<BlasThreadControl::Get>(dlsym(RTLD_DEFAULT, "bli_thread_get_num_threads"));
    c.name = "bli_thread_set_num_threads";
  }
  return c;
}

const BlasThreadControl& blas_control() {
  static const BlasThreadControl control = find_blas_control();
  return control;
}

}  // namespace

ThreadSettings apply_thread_policy(int torch_threads, int blas_threads) {
  TORCH_CHECK(torch_threads >= 1, "threads: expected >= 1 LibTorch intra-op threads, got ",
              torch_threads);
  TORCH_CHECK(blas_threads >= 0, "blas-threads: expected >= 1 BLAS threads, or 0 for the cores "
              "the intra-op threads leave, got ", blas_threads);
  at::set_num_threads(torch_threads);
  const auto& control = blas_control();
  if (control.set) {
    control.set(blas_threads == 0 ? default_blas_threads(torch_threads, cpu_count()) : blas_threads);
  }
  return current_threads();
}

int default_blas_threads(int torch_threads, int64_t cores, bool pools_fight) {
  if (!pools_fight) return int(std::max<int64_t>(1, cores));
  return int(std::max<int64_t>(1, cores / std::max(1, torch_threads)));
}

ThreadSettings current_threads() {
  ThreadSettings s;
  s.torch_threads = at::get_num_threads();
  const auto& control = blas_control();
  s.blas_control = control.name;
  if (control.get) s.blas_threads = control.get();
  s.blas_own_pool = control.own_pool;
  return s;
}

std::string pools_contend(const ThreadSettings& settings, int64_t cores) {
  if (!settings.blas_own_pool || settings.torch_threads <= 1 || settings.blas_threads <= 1) return "";
  if (int64_t(settings.torch_threads) * settings.blas_threads <= cores) return "";
  return fmt::format(
      "LibTorch's {} intra-op threads and the BLAS's own {} threads contend for {} cores: "
      "blockwise methods (and LibTorch's RNNs) can run several times slower. Give the BLAS one "
      "thread (OPENBLAS_NUM_THREADS=1 before starting; --blas-threads 1 in vlrnn's commands), "
      "LibTorch one (torch.set_num_threads(1); --threads 1), or install libopenblas0-openmp, "
      "whose threads are LibTorch's (docs/platforms.md, \"Threads\")",
      settings.torch_threads, settings.blas_threads, cores);
}

std::string thread_pools_warning() {
  if (!kPoolsFight) return "";
  return pools_contend(current_threads(), cpu_count());
}

}  // namespace vlrnn::measure
