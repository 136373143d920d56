#include "lib/idx_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#ifdef VLRNN_HAVE_ZLIB
#include <zlib.h>
#endif

namespace vlrnn::experiments {
namespace {

constexpr unsigned char kUnsignedByteType = 0x08;

#ifdef VLRNN_HAVE_ZLIB
// gzread passes a file that is not gzip-compressed through unchanged, so one path reads both.
std::string read_bytes(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  TORCH_CHECK(file, "\"", path, "\": cannot open the file (", std::strerror(errno), ")");
  std::string bytes;
  std::vector<char> buffer(1 << 20);
  int n = 0;
  while ((n = gzread(file.get(), buffer.data(), unsigned(buffer.size()))) > 0) {
    bytes.append(buffer.data(), size_t(n));
  }
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  TORCH_CHECK(n == 0 && code == Z_OK, "\"", path, "\": cannot read it (zlib: ", message,
              "); a gzip-compressed file cut short or damaged — reinstall or download it again");
  return bytes;
}
#else
std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  TORCH_CHECK(file, "\"", path, "\": cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  TORCH_CHECK(!(bytes.size() >= 2 && uint8_t(bytes[0]) == 0x1f && uint8_t(bytes[1]) == 0x8b),
              "\"", path, "\" is gzip-compressed, and this build has no zlib to read it: "
              "install zlib1g-dev and rebuild, or decompress it (gunzip -k)");
  return bytes;
}
#endif

uint32_t big_endian_u32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

}  // namespace

bool idx_reads_gzip() {
#ifdef VLRNN_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

torch::Tensor read_idx_file(const std::string& path) {
  const std::string bytes = read_bytes(path);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  TORCH_CHECK(bytes.size() >= 4, "\"", path, "\": ", bytes.size(), " bytes, too short for an "
              "IDX file (it starts with a 4-byte magic number)");
  const uint32_t magic = big_endian_u32(data);
  const unsigned dims = data[3];
  TORCH_CHECK(data[0] == 0 && data[1] == 0 && dims >= 1, "\"", path, "\": not an IDX file: "
              "its magic number is ", fmt::format("0x{:08X}", magic), ", expected 0x0000TTDD "
              "(two zero bytes, a type code TT, D >= 1 dimensions)");
  TORCH_CHECK(data[2] == kUnsignedByteType, "\"", path, "\": an IDX file of type code ",
              fmt::format("0x{:02X}", data[2]), "; only unsigned bytes (0x08, as in MNIST and "
              "Fashion-MNIST) are read");
  const size_t header = 4 + 4 * size_t(dims);
  TORCH_CHECK(bytes.size() >= header, "\"", path, "\": truncated in its header: ", dims,
              " dimensions need ", header, " bytes, the file has ", bytes.size());
  std::vector<int64_t> sizes;
  double needed = 1.0;  // bytes of values the sizes promise (a double: no overflow)
  for (unsigned d = 0; d < dims; ++d) {
    sizes.push_back(int64_t(big_endian_u32(data + 4 + 4 * d)));
    needed *= double(sizes.back());
  }
  const double available = double(bytes.size() - header);
  TORCH_CHECK(needed == available, "\"", path, "\": its sizes [",
              fmt::format("{}", fmt::join(sizes, ", ")), "] promise ",
              fmt::format("{:.0f}", needed), " bytes of values, the file holds ",
              fmt::format("{:.0f}", available), " after its header (",
              needed > available ? "truncated" : "extra bytes at the end", ")");
  auto values = torch::empty(sizes, torch::kUInt8);
  if (values.numel() > 0) std::memcpy(values.data_ptr<uint8_t>(), data + header, values.numel());
  return values;
}

}  // namespace vlrnn::experiments
