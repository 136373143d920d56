#include "lib/environment.h"

#include "lib/method_runner.h"
#include "lib/source_stamp.h"

#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/threads.h"
#include "vlrnn/registry/methods.h"

#include <unistd.h>

#include <ctime>
#include <iostream>

namespace vlrnn::experiments {
namespace {

using json = nlohmann::json;

std::string host_name() {
  char buffer[256] = {};
  return ::gethostname(buffer, sizeof(buffer) - 1) == 0 ? std::string(buffer) : std::string("unknown");
}

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buffer;
}

void warn_if_reference_blas(const json& env, const std::string& who) {
  if (!env["blas"]["reference"].get<bool>()) return;
  std::cerr << who << ": WARNING: LibTorch runs on the REFERENCE BLAS ("
            << env["blas"]["loaded"].get<std::string>()
            << "), ~30x slower than OpenBLAS: times and utilization measure the wrong thing. "
               "Install libopenblas0-pthread (scripts/install_deps.sh does).\n";
}

json peak_gemm_json(const measure::PeakGemm& peak) {
  return {{"n", peak.n}, {"flops_per_s", peak.flops_per_second}, {"threads", peak.threads},
          {"time_s", to_json(peak.time)}};
}

json environment_json() {
  const auto blas = measure::detect_blas();
  const auto threads = measure::current_threads();
  const auto stamp = built_from();  // NOTE [ Provenance from the build ]
  return {{"host", host_name()},
          {"git_sha", stamp.git_sha},
          {"git_dirty", git_dirty_json(stamp.tree)},
          {"libtorch_version", measure::libtorch_version()},
          {"blas", {{"vendor", blas.vendor},
                    {"loaded", blas.loaded},
                    {"alternative", blas.alternative},
                    {"reference", blas.reference},
                    {"core", blas.core}}},
          {"nproc", measure::cpu_count()},
          {"cpu_model", measure::cpu_model()},
          {"torch_threads", threads.torch_threads},
          {"blas_threads", threads.blas_threads},  // -1: the BLAS has no thread control
          {"methods_in_registry", method_names()},
          {"load_average", measure::load_average()}};
}

}  // namespace vlrnn::experiments
