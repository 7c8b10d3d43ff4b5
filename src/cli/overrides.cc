#include "cli/overrides.h"

#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace weft::cli {
namespace {

absl::Status Refuse(const std::string& set, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--set ", set, ": ", why));
}

// Sets `path` (its segments) under `root` to `value`.
absl::Status SetPath(YAML::Node root, const std::vector<std::string>& path, const YAML::Node& value,
                     const std::string& set) {
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    YAML::Node child = node[path[i]];
    if (!child.IsDefined() || child.IsNull()) {
      node[path[i]] = YAML::Node(YAML::NodeType::Map);
      child = node[path[i]];
    } else if (!child.IsMap()) {
      std::vector<std::string> crossed(path.begin(), path.begin() + static_cast<long>(i) + 1);
      return Refuse(set, absl::StrCat(absl::StrJoin(crossed, "."), " is not a mapping"));
    }
    node.reset(child);
  }
  node[path.back()] = value;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ApplyOverrides(const std::string& text,
                                           const std::vector<std::string>& sets) {
  if (sets.empty()) return text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the manifest is not YAML: ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("the manifest is not a YAML mapping");
  for (const std::string& set : sets) {
    const size_t eq = set.find('=');
    if (eq == std::string::npos) return Refuse(set, "expected FIELD=VALUE");
    const std::vector<std::string> path = absl::StrSplit(set.substr(0, eq), '.');
    for (const std::string& part : path) {
      if (part.empty()) return Refuse(set, "a field name is empty");
    }
    YAML::Node value;
    try {
      value = YAML::Load(set.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return Refuse(set, absl::StrCat("the value is not YAML: ", e.what()));
    }
    if (absl::Status s = SetPath(root, path, value, set); !s.ok()) return s;
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace weft::cli
