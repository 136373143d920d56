// NOTE [ Float32 without TF32 ] (vlrnn/core/exact_float32.h).
#include "vlrnn/core/exact_float32.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

namespace vlrnn::exact_float32_test {
namespace {

TEST(ExactFloat32, TurnsTf32OffWhereAGpuIsAndRestoresIt) {
  auto& context = at::globalContext();
  const bool cudnn = context.allowTF32CuDNN(), cublas = context.allowTF32CuBLAS();
  {
    const ExactFloat32 exact;
    if (at::hasCUDA()) {
      EXPECT_FALSE(context.allowTF32CuDNN());
      EXPECT_FALSE(context.allowTF32CuBLAS());
      const ExactFloat32 nested;  // finds them off: leaves them so
    } else {  // moot without a GPU: left as they are
      EXPECT_EQ(context.allowTF32CuDNN(), cudnn);
      EXPECT_EQ(context.allowTF32CuBLAS(), cublas);
    }
    if (at::hasCUDA()) EXPECT_FALSE(context.allowTF32CuDNN());  // after the nested one
  }
  EXPECT_EQ(context.allowTF32CuDNN(), cudnn);
  EXPECT_EQ(context.allowTF32CuBLAS(), cublas);
}

}  // namespace
}  // namespace vlrnn::exact_float32_test
