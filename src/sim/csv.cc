#include "sim/csv.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace weft::sim {

int CsvTable::Column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<CsvTable> ReadCsv(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  CsvTable t;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripSuffix(line, "\r");
    if (line.empty()) continue;
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (t.header.empty()) {
      t.header = std::move(fields);
      continue;
    }
    if (fields.size() != t.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", fields.size(),
                                                     " fields, the header has ", t.header.size()));
    }
    t.rows.push_back(std::move(fields));
  }
  if (t.header.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  return t;
}

absl::StatusOr<double> ParseNumber(const std::string& text, const std::string& what) {
  double v;
  if (!absl::SimpleAtod(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not a number"));
  }
  return v;
}

absl::StatusOr<int64_t> ParsePositiveInt(const std::string& text, const std::string& what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not a positive integer"));
  }
  return v;
}

}  // namespace weft::sim
