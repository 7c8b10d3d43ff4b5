#include "job/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace weft {
namespace {

bool IsKernelName(absl::string_view name) { return name == "onednn" || name == "blas"; }

bool IsReadableKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxKernelCacheKeyBytes) return false;
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return false;  // a tab or newline would not read back
  }
  return true;
}

// At most kMaxKernelCacheBytes of the regular file `path`; empty when it cannot be opened, is
// not a regular file (a FIFO would block the reader) or a symbolic link lies on its path.
std::string ReadBounded(const std::string& path) {
  const int fd = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return {};
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    data.resize(kMaxKernelCacheBytes);
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    data.resize(got);
  }
  ::close(fd);
  return data;
}

// The well-formed lines of `data`, at most kMaxKernelCacheEntries of them.
std::map<std::string, std::string> Parse(const std::string& data) {
  std::map<std::string, std::string> entries;
  for (absl::string_view line : absl::StrSplit(data, '\n')) {
    if (entries.size() >= kMaxKernelCacheEntries) break;
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits('\t', 1));
    if (fields.size() != 2 || !IsReadableKey(fields[0]) || !IsKernelName(fields[1])) continue;
    entries[std::string(fields[0])] = std::string(fields[1]);
  }
  return entries;
}

}  // namespace

KernelCache KernelCache::Load(const std::string& path) {
  KernelCache cache(path);
  cache.entries_ = Parse(ReadBounded(path));
  return cache;
}

std::optional<std::string> KernelCache::Find(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool KernelCache::Put(const std::string& key, const std::string& kernel) {
  if (!IsKernelName(kernel) || !IsReadableKey(key)) return false;
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second == kernel) return true;  // nothing to save
  if (it == entries_.end() && entries_.size() >= kMaxKernelCacheEntries) return false;
  entries_[key] = kernel;
  added_[key] = kernel;
  return true;
}

size_t KernelCache::PutAll(const KernelCache& other) {
  size_t taken = 0;
  for (const auto& [key, kernel] : other.entries_) taken += Put(key, kernel) ? 1 : 0;
  return taken;
}

absl::Status KernelCache::Save() const {
  if (added_.empty()) return absl::OkStatus();
  std::map<std::string, std::string> merged = Parse(ReadBounded(path_));
  for (const auto& [key, kernel] : added_) {
    if (merged.count(key) > 0 || merged.size() < kMaxKernelCacheEntries) merged[key] = kernel;
  }
  std::string data;
  for (const auto& [key, kernel] : merged) absl::StrAppend(&data, key, "\t", kernel, "\n");
  return WriteFileAtomic(path_, data, 0600);
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v = line;
    if (!absl::ConsumePrefix(&v, "model name")) continue;
    v = absl::StripLeadingAsciiWhitespace(v);
    if (!absl::ConsumePrefix(&v, ":")) continue;
    v = absl::StripAsciiWhitespace(v);
    if (!v.empty()) return std::string(v);
  }
  return "unknown cpu";
}

}  // namespace weft
