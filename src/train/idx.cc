#include "train/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace weft::train {
namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

bool ReadExact(gzFile f, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1 << 30));
    int r = gzread(f, p, chunk);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int64_t limit) {
  std::string file = path;
  if (!Exists(file)) {
    if (Exists(path + ".gz")) {
      file = path + ".gz";
    } else {
      return absl::NotFoundError(absl::StrCat("data file not found: ", path, " (or ", path,
                                              ".gz); the data set's directory lacks it"));
    }
  }
  gzFile f = gzopen(file.c_str(), "rb");
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", file));
  auto close = [&f] { gzclose(f); };
  uint8_t magic[4];
  if (!ReadExact(f, magic, 4) || magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 ||
      magic[3] == 0 || magic[3] > 4) {
    close();
    return absl::InvalidArgumentError(
        absl::StrCat(file, " is not an unsigned-byte IDX file (bad magic number)"));
  }
  IdxArray out;
  int64_t total = 1;
  for (int i = 0; i < magic[3]; ++i) {
    uint8_t b[4];
    if (!ReadExact(f, b, 4)) {
      close();
      return absl::InvalidArgumentError(absl::StrCat(file, " is truncated in its header"));
    }
    int64_t d = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (i == 0 && limit > 0 && d > limit) d = limit;
    if (d > 0 && total > kMaxIdxBytes / d) {
      close();
      return absl::InvalidArgumentError(absl::StrCat(file, " claims more than ", kMaxIdxBytes,
                                                     " bytes of data; not an IDX file weft reads"));
    }
    out.dims.push_back(d);
    total *= d;
  }
  // In chunks, so a header that claims more than the file holds costs no more memory than the
  // file's data before it is found truncated.
  constexpr int64_t kChunk = int64_t{16} << 20;
  for (int64_t done = 0; done < total;) {
    const int64_t n = std::min(kChunk, total - done);
    out.data.resize(static_cast<size_t>(done + n));
    if (!ReadExact(f, out.data.data() + done, static_cast<size_t>(n))) {
      close();
      return absl::InvalidArgumentError(
          absl::StrCat(file, " is truncated: expected ", total, " bytes of data"));
    }
    done += n;
  }
  close();
  return out;
}

}  // namespace weft::train
