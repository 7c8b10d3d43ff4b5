#include "train/csv.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/text.h"

namespace weft::train {

absl::StatusOr<CsvTable> ParseCsv(std::istream& in, const std::string& name, int64_t limit,
                                  int64_t max_rows, int64_t max_classes) {
  auto bad = [&name](int64_t line, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(name, " line ", line, ": ", what));
  };
  std::string line;
  if (!std::getline(in, line)) return bad(1, "empty; a header row comes first");
  std::vector<std::string> header = absl::StrSplit(absl::StripSuffix(line, "\r"), ',');
  if (header.size() < 2 || absl::StripAsciiWhitespace(header.back()) != "label") {
    return bad(1, "the header's last column must be `label` (after one or more features)");
  }
  CsvTable t;
  t.features = static_cast<int64_t>(header.size()) - 1;
  for (int64_t number = 2; std::getline(in, line); ++number) {
    absl::string_view row = absl::StripSuffix(line, "\r");
    if (absl::StripAsciiWhitespace(row).empty()) continue;
    if (limit > 0 && static_cast<int64_t>(t.labels.size()) >= limit) break;
    if (static_cast<int64_t>(t.labels.size()) >= max_rows) {
      return bad(number, absl::StrCat("more than ", max_rows, " rows"));
    }
    std::vector<absl::string_view> cells = absl::StrSplit(row, ',');
    if (cells.size() != header.size()) {
      return bad(number, absl::StrCat(cells.size(), " columns; the header has ", header.size()));
    }
    for (int64_t c = 0; c < t.features; ++c) {
      double v = 0;
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(cells[c]), &v) || !std::isfinite(v) ||
          std::fabs(v) > 3.4e38) {
        return bad(number, absl::StrCat("column ", c + 1, " (", Printable(header[c], 64),
                                        ") is not a finite number: '",
                                        Printable(std::string(cells[c]), 64), "'"));
      }
      t.samples.push_back(static_cast<float>(v));
    }
    int64_t label = -1;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(cells.back()), &label) || label < 0 ||
        label >= max_classes) {
      return bad(number, absl::StrCat("label '", Printable(std::string(cells.back()), 64),
                                      "' is not a class id in [0, ", max_classes, ")"));
    }
    t.labels.push_back(label);
  }
  if (t.labels.empty()) return bad(2, "no rows after the header");
  return t;
}

}  // namespace weft::train
