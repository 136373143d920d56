#include "vlrnn/measure/environment.h"
#include "vlrnn/measure/timer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace vlrnn::measure::environment_test {
namespace {

// Flags as /proc/cpuinfo lists them, for the processors the rule tells apart.
constexpr const char* kAvx512Flags = "fpu sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl";
constexpr const char* kAvx2Flags = "fpu sse2 avx avx2 fma";
constexpr const char* kSseFlags = "fpu sse2 sse4_2";

TEST(Environment, DescribesTheMachine) {
  const auto blas = detect_blas();
  EXPECT_FALSE(blas.vendor.empty());
  EXPECT_EQ(libtorch_version().empty(), false);
  EXPECT_GE(cpu_count(), 1);
  EXPECT_NE(describe_device(torch::kCPU).find("cpu"), std::string::npos);
  // The kernel is OpenBLAS's own name when OpenBLAS runs, and a faster one is only ever
  // suggested for a kernel that was found.
  if (blas.core.empty()) EXPECT_TRUE(blas.faster_core.empty());
}

// A build without its CUDA-only code cannot time or measure a GPU: it refuses the device
// where it is named, saying why, rather than timing it with the host's clock.
TEST(Environment, ABuildWithoutCudaCodeRefusesACudaDevice) {
  if (built_with_cuda()) GTEST_SKIP() << "this build has its CUDA code";
  try {
    synchronize(torch::Device(torch::kCUDA));
    FAIL() << "a CUDA device was accepted by a build without its CUDA code";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("VLRNN_WITH_CUDA=ON"), std::string::npos) << e.what();
  }
}

TEST(FasterOpenBlasCore, TheGenericKernelOnAnAvx512ProcessorGetsSkylakeX) {
  EXPECT_EQ(faster_openblas_core("Prescott", kAvx512Flags), "SkylakeX");
  EXPECT_EQ(faster_openblas_core("Haswell", kAvx512Flags), "SkylakeX");
  EXPECT_EQ(faster_openblas_core("sandybridge", kAvx512Flags), "SkylakeX");  // any case
}

TEST(FasterOpenBlasCore, AnAvx2ProcessorGetsHaswell) {
  EXPECT_EQ(faster_openblas_core("Prescott", kAvx2Flags), "Haswell");
  EXPECT_EQ(faster_openblas_core("Nehalem", kAvx2Flags), "Haswell");
}

TEST(FasterOpenBlasCore, AKernelAsFastAsTheProcessorAllowsIsKept) {
  EXPECT_EQ(faster_openblas_core("SkylakeX", kAvx512Flags), "");
  EXPECT_EQ(faster_openblas_core("SapphireRapids", kAvx512Flags), "");
  EXPECT_EQ(faster_openblas_core("Haswell", kAvx2Flags), "");
  EXPECT_EQ(faster_openblas_core("Zen", kAvx2Flags), "");
  EXPECT_EQ(faster_openblas_core("Prescott", kSseFlags), "");
}

TEST(FasterOpenBlasCore, AvxFiveTwelveWithoutAllItsPartsIsNotEnough) {
  // Knights Landing has AVX-512 F and CD, not BW, DQ, VL: SkylakeX's kernel needs them.
  EXPECT_EQ(faster_openblas_core("Prescott", "avx2 fma avx512f avx512cd"), "Haswell");
}

TEST(FasterOpenBlasCore, NoBlasOrAnotherArchitectureGetsNoAdvice) {
  EXPECT_EQ(faster_openblas_core("", kAvx512Flags), "");
  EXPECT_EQ(faster_openblas_core("NEOVERSEN1", kAvx512Flags), "");
}

TEST(BlasWarning, NamesTheKernelAndTheFix) {
  BlasInfo slow;
  slow.vendor = "OpenBLAS";
  slow.core = "Prescott";
  slow.faster_core = "SkylakeX";
  const auto warning = blas_warning(slow);
  EXPECT_NE(warning.find("\"Prescott\""), std::string::npos) << warning;
  EXPECT_NE(warning.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << warning;

  BlasInfo reference;
  reference.vendor = "reference";
  reference.reference = true;
  EXPECT_NE(blas_warning(reference).find("reference BLAS"), std::string::npos);

  BlasInfo fine;
  fine.vendor = "OpenBLAS";
  fine.core = "SkylakeX";
  EXPECT_EQ(blas_warning(fine), "");
}

}  // namespace
}  // namespace vlrnn::measure::environment_test
