#pragma once
// NOTE [ Float32 without TF32 ]: on NVIDIA GPUs since Ampere, cuDNN (its RNNs included, by
// torch's default) and cuBLAS may compute float32 with TF32's 10-bit mantissa. Two
// computations of one function then differ by up to ~1e-3 wherever a last-bit difference
// (another GEMM split for another block length) lands on a TF32 rounding step, which the
// float32 tolerance of 1e-5 would read as a wrong gradient, or a model as cut-dependent. So
// what checks exactness runs float32 as float32: verification against full BPTT, the cut
// check before a first call, and every command of the `vlrnn` tool (its measurements compare
// methods at one precision, full BPTT's included). A user's own training keeps torch's
// settings; an exact method then equals full BPTT at TF32's precision, as full BPTT does
// itself from one run to another.

namespace vlrnn {

// TF32 off for cuDNN and cuBLAS while it lives, as before after. Where no GPU is present it
// changes nothing (the settings are then moot, and newer LibTorch warns on the legacy ones).
class ExactFloat32 {
 public:
  ExactFloat32();
  ~ExactFloat32();
  ExactFloat32(const ExactFloat32&) = delete;
  ExactFloat32& operator=(const ExactFloat32&) = delete;

 private:
  bool changed_ = false;
  bool cudnn_ = false, cublas_ = false;  // the settings it found
};

}  // namespace vlrnn
