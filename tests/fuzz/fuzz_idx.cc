// libFuzzer target: the IDX reader (train/idx.h) on any file content, plain or gzipped.
// A file is refused with InvalidArgument or read into exactly product(dims) bytes; a crash, an
// allocation beyond the input's own size or a sanitizer report fails.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "train/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/weft-fuzz-idx-" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  for (int64_t limit : {0, 2}) {
    auto a = weft::train::ReadIdx(path, limit);
    if (!a.ok()) {
      if (!absl::IsInvalidArgument(a.status())) {
        std::cerr << "fuzz_idx: unexpected " << a.status() << "\n";
        std::abort();
      }
      continue;
    }
    int64_t total = 1;
    for (int64_t d : a->dims) total *= d;
    if (a->dims.empty() || a->dims.size() > 4 || static_cast<int64_t>(a->data.size()) != total) {
      std::cerr << "fuzz_idx: " << a->dims.size() << " dims and " << a->data.size()
                << " bytes of data\n";
      std::abort();
    }
  }
  return 0;
}
