// The csv data set format's parser (train/dataset.h), apart from libtorch so it can be fuzzed:
// a header row whose last column is `label` after one or more feature columns, then one row per
// sample of finite numbers and an integer class id in [0, max_classes). Blank lines are skipped;
// "\r\n" line ends are accepted.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::train {

struct CsvTable {
  int64_t features = 0;         // F, at least 1
  std::vector<float> samples;   // rows × F, row-major
  std::vector<int64_t> labels;  // one class id per row
};

// Reads `in` (named `name` in errors), the first `limit` rows when limit > 0. InvalidArgument
// "<name> line N: …" naming the line, and the column where there is one, for a missing or bad
// header, a row with another number of columns, a feature that is not a finite float32, a label
// out of [0, max_classes), more than `max_rows` rows or none; what it echoes of a cell is
// printable (common/text.h).
absl::StatusOr<CsvTable> ParseCsv(std::istream& in, const std::string& name, int64_t limit,
                                  int64_t max_rows, int64_t max_classes);

}  // namespace weft::train
