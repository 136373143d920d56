// The IDX reader: values and sizes come back as written, compressed or not, and a file that
// is not IDX, is cut short or is too long gets an error naming it and what is wrong.
#include "lib/idx_file.h"

#include "idx_test_files.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace vlrnn::experiments {
namespace {

using testing::expect_error_mentions;
using testing::idx_bytes;
using testing::write_file;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/vlrnn_idx_" + name;
}

torch::Tensor small_images() {
  return torch::arange(24, torch::kLong).mul(11).remainder(256).to(torch::kUInt8).view({3, 2, 4});
}

TEST(IdxFile, ReadsTheValuesInTheirSizes) {
  const auto path = temp_path("images");
  write_file(path, idx_bytes(small_images()));
  const auto read = read_idx_file(path);
  EXPECT_EQ(read.sizes(), small_images().sizes());
  EXPECT_EQ(read.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(read, small_images()));
  const auto labels = torch::tensor({7, 0, 255}, torch::kUInt8);  // one dimension
  write_file(path, idx_bytes(labels));
  EXPECT_TRUE(torch::equal(read_idx_file(path), labels));
}

// What Debian ships: gzip-compressed files. A compressed file cut short is an error, not
// a shorter tensor.
TEST(IdxFile, ReadsAGzipCompressedFileAndRefusesATruncatedOne) {
  if (!idx_reads_gzip()) GTEST_SKIP() << "built without zlib";
  const auto path = temp_path("gz");
  write_file(path, idx_bytes(small_images()));
  if (std::system(("gzip -f " + path).c_str()) != 0) GTEST_SKIP() << "no gzip command";
  EXPECT_TRUE(torch::equal(read_idx_file(path + ".gz"), small_images()));
  const auto size = std::filesystem::file_size(path + ".gz");
  std::filesystem::resize_file(path + ".gz", size - 12);  // the CRC, the length, a little data
  expect_error_mentions([&] { read_idx_file(path + ".gz"); },
                        {path + ".gz", "cannot read it", "zlib"});
}

TEST(IdxFile, AWrongMagicNumberIsNamed) {
  const auto path = temp_path("magic");
  auto bytes = idx_bytes(small_images());
  bytes[0] = 'P';  // a zip archive, say
  write_file(path, bytes);
  expect_error_mentions([&] { read_idx_file(path); },
                        {path, "not an IDX file", "magic number is 0x50000803"});
  bytes = idx_bytes(small_images());
  bytes[2] = 0x0D;  // floats
  write_file(path, bytes);
  expect_error_mentions([&] { read_idx_file(path); }, {path, "type code 0x0D", "0x08"});
  bytes[2] = 0x08;
  bytes[3] = 0;  // no dimensions
  write_file(path, bytes);
  expect_error_mentions([&] { read_idx_file(path); }, {path, "not an IDX file"});
}

TEST(IdxFile, ATruncatedOrOverlongFileIsNamedWithItsSizes) {
  const auto path = temp_path("short");
  const auto bytes = idx_bytes(small_images());  // 4 + 12 header bytes, 24 values
  write_file(path, bytes.substr(0, bytes.size() - 1));
  expect_error_mentions([&] { read_idx_file(path); },
                        {path, "[3, 2, 4]", "promise 24 bytes", "holds 23", "truncated"});
  write_file(path, bytes + "x");
  expect_error_mentions([&] { read_idx_file(path); },
                        {path, "holds 25", "extra bytes at the end"});
  write_file(path, bytes.substr(0, 10));
  expect_error_mentions([&] { read_idx_file(path); },
                        {path, "truncated in its header", "need 16 bytes", "has 10"});
  write_file(path, bytes.substr(0, 2));
  expect_error_mentions([&] { read_idx_file(path); }, {path, "2 bytes, too short"});
  // Sizes whose product overflows 64 bits: still "more than the file holds".
  std::string huge = {0, 0, 0x08, 3};
  huge += std::string(12, char(0xff));
  write_file(path, huge);
  expect_error_mentions([&] { read_idx_file(path); }, {path, "truncated"});
}

TEST(IdxFile, AMissingFileIsNamed) {
  expect_error_mentions([] { read_idx_file("/no/such/idx"); }, {"/no/such/idx", "cannot open"});
}

}  // namespace
}  // namespace vlrnn::experiments
