#pragma once
// Reading IDX files, the format of the MNIST family of image data sets (LeCun et al. 1998;
// Fashion-MNIST keeps it): a 4-byte magic number — two zero bytes, a type code, the number
// of dimensions D — then D sizes as big-endian uint32, then the values in row-major order.
// Only unsigned bytes (type code 0x08) are read: what MNIST and Fashion-MNIST store.
// A file compressed with gzip (as Debian's dataset-fashion-mnist ships them) is read
// through zlib; an uncompressed one as it is.

#include <torch/torch.h>

#include <string>

namespace vlrnn::experiments {

// The file's values as a uint8 tensor of its D sizes. Throws naming `path` when the file
// cannot be read, is not gzip-compressed data that zlib can inflate, has a wrong magic
// number, or holds more or fewer bytes than its sizes promise.
torch::Tensor read_idx_file(const std::string& path);

// Whether this build reads gzip-compressed files (zlib was found when it was configured).
bool idx_reads_gzip();

}  // namespace vlrnn::experiments
