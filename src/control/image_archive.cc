#include "control/image_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace weft {
namespace {

constexpr size_t kBlock = 512;

// A tar file, read block by block through zlib (which passes a file that is not gzip through).
class TarReader {
 public:
  explicit TarReader(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {}
  ~TarReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;
  bool ok() const { return file_ != nullptr; }
  // Reads `n` bytes into `out`; false at the end or on an error.
  bool Read(char* out, size_t n) {
    return gzread(file_, out, static_cast<unsigned>(n)) == static_cast<int>(n);
  }
  bool Skip(int64_t bytes) { return bytes == 0 || gzseek(file_, bytes, SEEK_CUR) >= 0; }

 private:
  gzFile file_;
};

// A header field: up to `n` bytes, NUL-terminated or not.
std::string Field(const char* block, size_t offset, size_t n) {
  const char* p = block + offset;
  return std::string(p, strnlen(p, n));
}

// The first path component of an entry's name, without a leading "./".
std::string TopOf(std::string name) {
  absl::string_view v = name;
  while (absl::ConsumePrefix(&v, "./")) {
  }
  v = absl::StripPrefix(v, "/");
  return std::string(v.substr(0, v.find('/')));
}

absl::Status NotAnImage(const std::set<std::string>& top) {
  std::string seen;
  int n = 0;
  for (const std::string& t : top) {
    if (n++ == 5) {
      absl::StrAppend(&seen, ", ...");
      break;
    }
    absl::StrAppend(&seen, seen.empty() ? "" : ", ", t);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "is a tar archive but not an image: no oci-layout and index.json (an OCI archive, podman "
      "save --format oci-archive), no manifest.json (a Docker archive) and no bin, usr or etc (a "
      "root file system) at its top (it holds: ",
      seen.empty() ? "nothing" : seen, ")"));
}

}  // namespace

absl::StatusOr<std::string> ImageArchiveFormat(const std::string& path) {
  TarReader tar(path);
  if (!tar.ok()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::set<std::string> top;
  std::string long_name;  // a GNU 'L' entry's name for the entry after it
  char block[kBlock];
  for (int entries = 0; entries < kMaxArchiveEntries; ++entries) {
    if (!tar.Read(block, kBlock)) {
      if (entries == 0) return absl::InvalidArgumentError("is not a tar archive (too short)");
      break;  // a truncated end: judge by what was read
    }
    if (std::all_of(block, block + kBlock, [](char c) { return c == 0; })) break;  // the end
    if (entries == 0 && std::memcmp(block + 257, "ustar", 5) != 0) {
      return absl::InvalidArgumentError("is not a tar archive (no ustar header)");
    }
    int64_t size = 0;
    const std::string octal(absl::StripAsciiWhitespace(Field(block, 124, 12)));
    if (!octal.empty()) {
      char* end = nullptr;
      size = std::strtoll(octal.c_str(), &end, 8);
      if (end == nullptr || *end != '\0') {
        return absl::InvalidArgumentError("is not a tar archive (a corrupt entry size)");
      }
    }
    if (size < 0) return absl::InvalidArgumentError("is not a tar archive (a negative size)");
    const char type = block[156];
    const int64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    if (type == 'L' && size < 4096) {  // GNU long name: the name is the data
      std::string data(static_cast<size_t>(padded), '\0');
      if (!tar.Read(data.data(), data.size())) break;
      long_name = std::string(data.c_str(), strnlen(data.c_str(), static_cast<size_t>(size)));
      continue;
    }
    std::string name = long_name.empty()
                           ? Field(block, 345, 155).empty()
                                 ? Field(block, 0, 100)
                                 : absl::StrCat(Field(block, 345, 155), "/", Field(block, 0, 100))
                           : long_name;
    long_name.clear();
    if (type != 'x' && type != 'g' && !name.empty()) {
      top.insert(TopOf(name));
      if (top.count("oci-layout") && top.count("index.json")) return std::string(kOciArchive);
    }
    if (!tar.Skip(padded)) break;
  }
  if (top.count("oci-layout") && top.count("index.json")) return std::string(kOciArchive);
  if (top.count("manifest.json")) return std::string(kDockerArchive);
  if (top.count("bin") || top.count("usr") || top.count("etc")) return std::string(kRootfsArchive);
  return NotAnImage(top);
}

}  // namespace weft
