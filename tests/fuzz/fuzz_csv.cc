// libFuzzer target: the csv data set parser (train/csv.h) on any file content. A file is refused
// with InvalidArgument naming it and a line, or read into a table whose samples are exactly
// rows × features finite floats and whose labels are class ids in range; a crash or a sanitizer
// report fails.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "train/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxRows = 1000, kMaxClasses = 10;
  for (int64_t limit : {0, 2}) {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    auto t = weft::train::ParseCsv(in, "train.csv", limit, kMaxRows, kMaxClasses);
    if (!t.ok()) {
      const std::string message(t.status().message());
      if (!absl::IsInvalidArgument(t.status()) || message.rfind("train.csv line ", 0) != 0) {
        std::cerr << "fuzz_csv: unexpected " << t.status() << "\n";
        std::abort();
      }
      continue;
    }
    const auto rows = static_cast<int64_t>(t->labels.size());
    bool sound = t->features >= 1 && rows >= 1 && rows <= kMaxRows &&
                 (limit == 0 || rows <= limit) &&
                 static_cast<int64_t>(t->samples.size()) == rows * t->features;
    for (float v : t->samples) sound = sound && std::isfinite(v);
    for (int64_t y : t->labels) sound = sound && y >= 0 && y < kMaxClasses;
    if (!sound) {
      std::cerr << "fuzz_csv: " << rows << " rows of " << t->features << " features, "
                << t->samples.size() << " values\n";
      std::abort();
    }
  }
  return 0;
}
