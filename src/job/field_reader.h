// The manifest reader's tools (internal to job/): FieldReader reads typed fields out of a YAML
// mapping and collects every problem, naming the field, instead of stopping at the first; and the
// readers of the manifest's sections that live outside job_spec.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text.h"
#include "job/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace weft::spec_internal {

inline constexpr int kMaxEpochs = kMaxJobEpochs;
inline constexpr int kMaxBatchSize = 1 << 20;
inline constexpr int kMaxThreads = 256;
inline constexpr size_t kMaxStringBytes = 4096;  // a path, a description

inline std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : absl::StrCat(prefix, ".", key);
}

// What a node holds, safe to echo in an error (common/text.h).
inline std::string Describe(const YAML::Node& n) {
  if (n.IsScalar()) return absl::StrCat("'", Printable(n.Scalar()), "'");
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "null";
}

// A mapping's key as a field name: printable, and never empty (an empty key, or one that is a
// list or mapping, would otherwise give a problem that names no field).
inline std::string KeyLabel(const YAML::Node& key) {
  return key.IsScalar() ? FieldName(key.Scalar()) : "(a key that is not text)";
}

// Reads typed fields out of a YAML mapping, collecting every problem instead of stopping at
// the first one.
class FieldReader {
 public:
  explicit FieldReader(std::vector<FieldError>* errors) : errors_(errors) {}

  void Error(const std::string& field, const std::string& problem) {
    errors_->push_back({field, problem});
  }

  // Checks that `node` is a mapping with only `allowed` keys. Returns false if not a mapping.
  bool Mapping(const YAML::Node& node, const std::string& path,
               const std::set<std::string>& allowed) {
    if (!node.IsMap()) {
      Error(path.empty() ? "(document)" : path,
            absl::StrCat("must be a mapping, got ", Describe(node)));
      return false;
    }
    for (const auto& kv : node) {
      if (!kv.first.IsScalar() || !allowed.count(kv.first.Scalar())) {
        Error(Join(path, KeyLabel(kv.first)),
              absl::StrCat("unknown field (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return true;
  }

  // Integer in [min, max]; leaves `out` unchanged when absent.
  template <typename Int>
  void Integer(const YAML::Node& parent, const std::string& path, const std::string& key, Int* out,
               int64_t min, int64_t max, const char* what) {
    YAML::Node n = parent[key];
    if (!n) return;
    IntegerNode(n, Join(path, key), out, min, max, what);
  }

  template <typename Int>
  void IntegerNode(const YAML::Node& n, const std::string& field, Int* out, int64_t min,
                   int64_t max, const char* what) {
    int64_t v = 0;
    if (!n.IsScalar() || !ParseInt(n.Scalar(), &v) || v < min || v > max) {
      Error(field, absl::StrCat("must be ", what, ", got ", Describe(n)));
      return;
    }
    *out = static_cast<Int>(v);
  }

  // true or false; leaves `out` unchanged when absent.
  void Boolean(const YAML::Node& parent, const std::string& path, const std::string& key,
               bool* out) {
    YAML::Node n = parent[key];
    if (!n) return;
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
      *out = n.Scalar() == "true";
      return;
    }
    Error(Join(path, key), absl::StrCat("must be true or false, got ", Describe(n)));
  }

  // Real number in [min, max] (or (min, max] when min_exclusive).
  void Real(const YAML::Node& parent, const std::string& path, const std::string& key, double* out,
            double min, double max, bool min_exclusive, const char* what) {
    YAML::Node n = parent[key];
    if (!n) return;
    std::string field = Join(path, key);
    double v = 0;
    bool ok = n.IsScalar() && ParseReal(n.Scalar(), &v) && std::isfinite(v) &&
              (min_exclusive ? v > min : v >= min) && v <= max;
    if (!ok) {
      Error(field, absl::StrCat("must be ", what, ", got ", Describe(n)));
      return;
    }
    *out = v;
  }

  // Text of at most `max_bytes`: valid UTF-8 without control characters (`multiline` allows
  // tab and newline), optionally from a fixed set of choices.
  void String(const YAML::Node& parent, const std::string& path, const std::string& key,
              std::string* out, const std::set<std::string>& choices = {},
              size_t max_bytes = kMaxStringBytes, bool multiline = false) {
    YAML::Node n = parent[key];
    if (!n) return;
    std::string field = Join(path, key);
    if (!n.IsScalar()) {
      Error(field, absl::StrCat("must be a string, got ", Describe(n)));
      return;
    }
    const std::string& v = n.Scalar();
    if (std::string problem = TextProblem(v, multiline); !problem.empty()) {
      Error(field, absl::StrCat("must be UTF-8 text without control characters; it ", problem));
      return;
    }
    if (v.size() > max_bytes) {
      Error(field, absl::StrCat("must be at most ", max_bytes, " bytes, got ", v.size()));
      return;
    }
    if (!choices.empty() && !choices.count(v)) {
      Error(field,
            absl::StrCat("must be one of ", absl::StrJoin(choices, ", "), ", got ", Describe(n)));
      return;
    }
    *out = v;
  }

 private:
  static bool ParseInt(const std::string& s, int64_t* v) { return absl::SimpleAtoi(s, v); }
  static bool ParseReal(const std::string& s, double* v) { return absl::SimpleAtod(s, v); }

  std::vector<FieldError>* errors_;
};

// The `training` section (spec_training.cc): every field of TrainingSpec, `sync` and `ps`.
void ReadTraining(FieldReader& r, const YAML::Node& n, JobSpec* spec);

// Loads `text` (YAML, or JSON read as YAML 1.2) and reads the document with `read`, collecting
// every problem in `errors` (cleared first; never null). InvalidArgument "invalid <what>: field:
// problem; …" when there is any, a document that does not parse or read included.
absl::Status ReadManifestText(std::string_view text, const std::string& what,
                              std::vector<FieldError>* errors,
                              const std::function<void(FieldReader&, const YAML::Node&)>& read);

}  // namespace weft::spec_internal
