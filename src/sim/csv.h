// Reading the small, unquoted CSV files of the Pollux artifact and the Philly job log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::sim {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  // Index of column `name`, or -1.
  int Column(const std::string& name) const;
};

// Reads `path`: first line is the header, fields split on ',' (no quoting: none of these files
// quote). NotFound if missing; InvalidArgument naming the line when a row's width differs.
absl::StatusOr<CsvTable> ReadCsv(const std::string& path);

// Parses a decimal number; InvalidArgument naming `what` otherwise.
absl::StatusOr<double> ParseNumber(const std::string& text, const std::string& what);

// Parses an integer >= 1; InvalidArgument naming `what` otherwise ("<what>: 'x' is not a
// positive integer").
absl::StatusOr<int64_t> ParsePositiveInt(const std::string& text, const std::string& what);

}  // namespace weft::sim
