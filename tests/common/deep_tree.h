// A directory tree as a tenant's program could nest it to hide what it writes: `levels`
// directories of `name_length`-character names below `root`, and `bytes` of data in a file at the
// bottom. Made with mkdirat/openat from descriptor to descriptor, so it can go past PATH_MAX.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace weft::testing {

// True when the whole tree and its file were made.
inline bool MakeDeepTree(const std::string& root, int levels, size_t name_length, int64_t bytes) {
  int fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const std::string name(name_length, 'd');
  for (int i = 0; i < levels; ++i) {
    if (mkdirat(fd, name.c_str(), 0700) != 0) break;
    const int next = openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(fd);
    fd = next;
    if (fd < 0) return false;
    if (i + 1 == levels) {
      const int file = openat(fd, "payload", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      const std::string block(1 << 16, 'x');
      bool ok = file >= 0;
      for (int64_t written = 0; ok && written < bytes; written += block.size()) {
        ok = write(file, block.data(), block.size()) == static_cast<ssize_t>(block.size());
      }
      if (file >= 0) close(file);
      close(fd);
      return ok;
    }
  }
  close(fd);
  return false;
}

}  // namespace weft::testing
