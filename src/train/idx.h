// Reader for the IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/):
// a big-endian header (magic 0x0000 08 NN, NN = number of dimensions), the dimension sizes,
// then unsigned bytes. Files may be gzipped or plain; zlib reads both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::train {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// The most data bytes ReadIdx accepts (64 GiB); a header claiming more is refused.
inline constexpr int64_t kMaxIdxBytes = int64_t{1} << 36;

// Reads `path` (or `path` + ".gz" if `path` does not exist). Reads at most `limit` items along
// the first dimension when limit > 0. NotFound if neither file exists; InvalidArgument if the
// content is not unsigned-byte IDX, claims more than kMaxIdxBytes, or is truncated (found with
// no more memory than the file's data).
absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int64_t limit = 0);

}  // namespace weft::train
