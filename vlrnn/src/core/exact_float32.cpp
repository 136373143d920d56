#include "vlrnn/core/exact_float32.h"

#include <ATen/Context.h>

namespace vlrnn {

ExactFloat32::ExactFloat32() {
  if (!at::hasCUDA()) return;
  auto& context = at::globalContext();
  cudnn_ = context.allowTF32CuDNN();
  cublas_ = context.allowTF32CuBLAS();
  if (!cudnn_ && !cublas_) return;
  context.setAllowTF32CuDNN(false);
  context.setAllowTF32CuBLAS(false);
  changed_ = true;
}

ExactFloat32::~ExactFloat32() {
  if (!changed_) return;
  auto& context = at::globalContext();
  context.setAllowTF32CuDNN(cudnn_);
  context.setAllowTF32CuBLAS(cublas_);
}

}  // namespace vlrnn
