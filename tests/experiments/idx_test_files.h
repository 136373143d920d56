#pragma once
// Small IDX files (lib/idx_file.h) and stand-in Fashion-MNIST folders for the tests: the
// real data set is 30 MB that a unit test need not read.

#include "lib/tasks.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace vlrnn::testing {

// The bytes of an IDX file of unsigned bytes holding `values` (uint8, any sizes).
inline std::string idx_bytes(const torch::Tensor& values) {
  std::string bytes = {0, 0, 0x08, char(values.dim())};
  for (const int64_t size : values.sizes()) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes += char((uint64_t(size) >> shift) & 0xff);
  }
  const auto flat = values.contiguous();
  bytes.append(reinterpret_cast<const char*>(flat.data_ptr<uint8_t>()), size_t(flat.numel()));
  return bytes;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fresh folder under the test's temporary directory with the four files of
// kFashionMnistFiles, uncompressed: images [N, R, C] uint8 and labels [N] uint8 per split.
inline std::string write_fashion_mnist_folder(const std::string& name,
                                              const torch::Tensor& train_images,
                                              const torch::Tensor& train_labels,
                                              const torch::Tensor& test_images,
                                              const torch::Tensor& test_labels) {
  const auto folder = ::testing::TempDir() + "/vlrnn_" + name;
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  const torch::Tensor parts[4] = {train_images, train_labels, test_images, test_labels};
  for (int i = 0; i < 4; ++i) {
    write_file(folder + "/" + experiments::kFashionMnistFiles[i], idx_bytes(parts[i]));
  }
  return folder;
}

}  // namespace vlrnn::testing
