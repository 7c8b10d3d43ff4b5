// Logging for weft's processes: spdlog, plus a formatter so absl::string_view (what
// absl::Status::message() returns in Debian's Abseil) can be logged directly.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
