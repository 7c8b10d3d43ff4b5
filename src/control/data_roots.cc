#include "control/data_roots.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

// Whether `path` is `root` or inside it, component by component ("/data" does not hold
// "/database").
bool Inside(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

}  // namespace

DataRoots::DataRoots(std::vector<std::string> roots) {
  for (const std::string& r : roots) {
    const fs::path given = fs::path(r).lexically_normal();
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(given, ec);
    given_.push_back(given.string());
    canonical_.push_back(ec ? given.string() : canonical.string());
  }
}

absl::Status DataRoots::Check(const std::string& path) const {
  if (given_.empty()) return absl::OkStatus();
  const fs::path written = fs::path(path).lexically_normal();
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(written, ec);
  for (size_t i = 0; i < given_.size(); ++i) {
    const bool as_written = Inside(written, given_[i]) || Inside(written, canonical_[i]);
    if (as_written && !ec && Inside(resolved, canonical_[i])) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("'", Printable(path), "' is not inside a data directory this weftd serves (",
                   absl::StrJoin(given_, ", "), "); the operator adds one with weftd --data-root"));
}

}  // namespace weft
