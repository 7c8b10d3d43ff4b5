// `weft submit --set FIELD=VALUE`: a manifest's fields changed on the command line, as the
// Python client's overrides do (sdk/python/weft/client.py apply_overrides). weftd validates the
// result like any manifest, so a wrong value is refused naming its field.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::cli {

// The manifest `text` (YAML or JSON) with each "dotted.field=value" of `sets` set in order: the
// value read as YAML (3e-4 a number, [32, 64] a list, '"7"' a string), the mappings on the way
// created. Emitted as YAML (comments are not kept). InvalidArgument naming the --set when it is
// not FIELD=VALUE, a field name is empty, its value is not YAML, or a field crosses a value that
// is not a mapping; and when the manifest is not a YAML mapping.
absl::StatusOr<std::string> ApplyOverrides(const std::string& text,
                                           const std::vector<std::string>& sets);

}  // namespace weft::cli
