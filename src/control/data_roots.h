// Which host directories tenants may train from. A manifest's data.path is read by the job's
// learners, which run as weftd's user: unbounded, a tenant could point them at any directory that
// user can read, and learn from the failure whether it exists. weftd --data-root names the roots.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace weft {

class DataRoots {
 public:
  // `roots`: absolute directories; symlinks in them are resolved once, here. Empty: any path.
  explicit DataRoots(std::vector<std::string> roots);

  // OK when `path` (absolute) lies inside a root both as written, with "." and ".." resolved
  // lexically, and with every symlink along the part of it that exists resolved. Otherwise
  // PermissionDenied, with the same message whether or not the path exists.
  absl::Status Check(const std::string& path) const;

  const std::vector<std::string>& roots() const { return given_; }

 private:
  std::vector<std::string> given_;      // as configured, lexically normalised
  std::vector<std::string> canonical_;  // the same with symlinks resolved
};

}  // namespace weft
