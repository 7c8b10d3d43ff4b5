#include "job/search_space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/text.h"
#include "job/field_reader.h"

namespace weft {
namespace {

using spec_internal::Describe;
using spec_internal::FieldReader;
using spec_internal::Join;
using spec_internal::KeyLabel;

constexpr size_t kMaxChoiceBytes = 256;
constexpr double kMaxIntMagnitude = 9007199254740992.0;  // 2^53: exact in a double

// A field a space may set: under model. or training., in lower-case words, two or three deep.
bool SearchableField(const std::string& field) {
  std::vector<std::string> parts = absl::StrSplit(field, '.');
  if (parts.size() < 2 || parts.size() > 3) return false;
  if (parts[0] != "model" && parts[0] != "training") return false;
  for (const std::string& p : parts) {
    if (p.empty() || p.size() > 64) return false;
    for (char c : p) {
      if (!((c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9'))) return false;
    }
  }
  return true;
}

// Reads [low, high] of a range distribution; false (with the problem recorded) if it is not one.
bool ReadRange(FieldReader& r, const YAML::Node& n, const std::string& field,
               const std::string& kind, SearchDimension* d) {
  double v[2] = {0, 0};
  bool ok = n.IsSequence() && n.size() == 2;
  for (size_t i = 0; ok && i < 2; ++i) {
    ok = n[i].IsScalar() && absl::SimpleAtod(n[i].Scalar(), &v[i]) && std::isfinite(v[i]);
  }
  if (!ok) {
    r.Error(field, absl::StrCat(kind, " needs [low, high], two numbers; got ", Describe(n)));
    return false;
  }
  d->low = v[0];
  d->high = v[1];
  if (!(d->low < d->high)) {
    r.Error(field, absl::StrCat(kind, " needs low < high, got [", Printable(n[0].Scalar()), ", ",
                                Printable(n[1].Scalar()), "]"));
    return false;
  }
  if (d->kind == SearchDimension::Kind::kLogUniform && d->low <= 0) {
    r.Error(field, absl::StrCat("loguniform needs 0 < low, got ", Printable(n[0].Scalar())));
    return false;
  }
  if (d->kind == SearchDimension::Kind::kIntUniform &&
      (d->low != std::floor(d->low) || d->high != std::floor(d->high) ||
       std::fabs(d->low) > kMaxIntMagnitude || std::fabs(d->high) > kMaxIntMagnitude)) {
    r.Error(field, "int needs whole numbers of magnitude at most 2^53");
    return false;
  }
  return true;
}

bool ReadChoices(FieldReader& r, const YAML::Node& n, const std::string& field,
                 SearchDimension* d) {
  if (!n.IsSequence() || n.size() == 0 || n.size() > kMaxSearchChoices) {
    r.Error(field, absl::StrCat("choice needs a list of 1 to ", kMaxSearchChoices, " values, got ",
                                Describe(n)));
    return false;
  }
  std::set<std::string> seen;
  for (const YAML::Node& v : n) {
    std::vector<std::string> scalars;
    bool flat = v.IsScalar() || v.IsSequence();
    if (v.IsScalar()) scalars.push_back(v.Scalar());
    for (size_t i = 0; flat && v.IsSequence() && i < v.size(); ++i) {
      flat = v[i].IsScalar();
      if (flat) scalars.push_back(v[i].Scalar());
    }
    if (!flat) {
      r.Error(field, absl::StrCat("each choice must be a number, text, boolean or a list of them, "
                                  "got ",
                                  Describe(v)));
      return false;
    }
    YAML::Emitter text;
    text << YAML::Flow << v;
    const std::string s = text.c_str();
    bool clean = true;
    for (const std::string& scalar : scalars) clean = clean && TextProblem(scalar, false).empty();
    if (!clean || s.empty() || s.size() > kMaxChoiceBytes) {
      r.Error(field, absl::StrCat("each choice must be 1 to ", kMaxChoiceBytes,
                                  " bytes of text without control characters"));
      return false;
    }
    if (!seen.insert(s).second) {
      r.Error(field, absl::StrCat("choice lists ", Printable(s), " twice"));
      return false;
    }
    d->choices.push_back(s);
  }
  return true;
}

void ReadDimension(FieldReader& r, const YAML::Node& key, const YAML::Node& value,
                   const std::string& path, SearchSpace* space) {
  const std::string field = Join(path, KeyLabel(key));
  SearchDimension d;
  d.field = key.IsScalar() ? key.Scalar() : "";
  if (!SearchableField(d.field)) {
    r.Error(field,
            "must be a field of the base job under model. or training. "
            "(e.g. training.learning_rate)");
    return;
  }
  for (const SearchDimension& other : space->dimensions) {
    if (other.field == d.field) {
      r.Error(field, "is listed twice");
      return;
    }
  }
  if (!r.Mapping(value, field, {"uniform", "loguniform", "int", "choice"})) return;
  if (value.size() != 1) {
    r.Error(field, "must name one distribution: uniform, loguniform, int or choice");
    return;
  }
  const std::string kind = value.begin()->first.Scalar();
  const YAML::Node arg = value.begin()->second;
  bool ok = false;
  if (kind == "choice") {
    d.kind = SearchDimension::Kind::kChoice;
    ok = ReadChoices(r, arg, field, &d);
  } else if (kind == "uniform" || kind == "loguniform" || kind == "int") {
    d.kind = kind == "uniform"      ? SearchDimension::Kind::kUniform
             : kind == "loguniform" ? SearchDimension::Kind::kLogUniform
                                    : SearchDimension::Kind::kIntUniform;
    ok = ReadRange(r, arg, field, kind, &d);
  }
  if (ok) space->dimensions.push_back(std::move(d));
}

// SplitMix64's finaliser (Steele et al., OOPSLA 2014): a well-mixed 64-bit hash, the same on every
// platform (std::uniform_real_distribution is not).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform draw in [0, 1) for dimension `d` of trial `trial`.
double Uniform01(uint64_t seed, int64_t trial, size_t d) {
  const uint64_t bits = Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(trial)) ^ d);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

std::string Real(double v) { return absl::StrFormat("%.6g", v); }
std::string Int(double v) { return absl::StrFormat("%.0f", v); }

std::string Draw(const SearchDimension& d, double u) {
  switch (d.kind) {
    case SearchDimension::Kind::kUniform:
      return Real(d.low + u * (d.high - d.low));
    case SearchDimension::Kind::kLogUniform:
      return Real(std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low))));
    case SearchDimension::Kind::kIntUniform:
      return Int(std::min(d.high, d.low + std::floor(u * (d.high - d.low + 1))));
    case SearchDimension::Kind::kChoice:
      return d.choices[std::min(d.choices.size() - 1, static_cast<size_t>(u * d.choices.size()))];
  }
  return "";
}

// The values a dimension can take at its ends: a range's low and high, every choice.
std::vector<std::string> Extremes(const SearchDimension& d) {
  switch (d.kind) {
    case SearchDimension::Kind::kUniform:
    case SearchDimension::Kind::kLogUniform:
      return {Real(d.low), Real(d.high)};
    case SearchDimension::Kind::kIntUniform:
      return {Int(d.low), Int(d.high)};
    case SearchDimension::Kind::kChoice:
      return d.choices;
  }
  return {};
}

std::string Listed(const std::vector<FieldError>& errors) {
  std::vector<std::string> parts;
  for (const FieldError& e : errors) parts.push_back(absl::StrCat(e.field, ": ", e.problem));
  return absl::StrJoin(parts, "; ");
}

}  // namespace

absl::StatusOr<SearchSpace> ParseSearchSpace(const YAML::Node& space, const std::string& path,
                                             std::vector<FieldError>* errors) {
  std::vector<FieldError> local;
  std::vector<FieldError>* errs = errors ? errors : &local;
  errs->clear();
  FieldReader r(errs);
  SearchSpace out;
  if (!space.IsMap() || space.size() == 0 || space.size() > kMaxSearchDimensions) {
    r.Error(path, absl::StrCat("must map 1 to ", kMaxSearchDimensions,
                               " fields to their distributions, got ", Describe(space)));
  } else {
    for (const auto& kv : space) ReadDimension(r, kv.first, kv.second, path, &out);
  }
  if (!errs->empty()) return absl::InvalidArgumentError(Listed(*errs));
  return out;
}

namespace {

// The largest grid drawn without replacement; past it, repeats in max_trials draws are as rare as
// they are in a real range.
constexpr int64_t kMaxPermutedGrid = int64_t{1} << 40;

// Point π(trial) of a permutation π of [0, n) drawn with `seed`: the forward Fisher–Yates
// shuffle, step i swapping position i with one of i…n-1, over a sparse array (O(trial) time and
// memory, whatever n is). Counter-based like Uniform01, on a stream of its own.
int64_t PermutedIndex(uint64_t seed, int64_t n, int64_t trial) {
  std::unordered_map<int64_t, int64_t> moved;  // position -> the point now there, where not itself
  auto at = [&moved](int64_t i) {
    auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  int64_t point = 0;
  for (int64_t i = 0; i <= trial; ++i) {
    const double u = Uniform01(seed ^ 0x5045524d55544531ULL, i, 0);  // "PERMUTE1"
    const int64_t j = std::min(n - 1, i + static_cast<int64_t>(u * static_cast<double>(n - i)));
    point = at(j);
    moved[j] = at(i);
    moved[i] = point;
  }
  return point;
}

}  // namespace

Hyperparameters SampleTrial(const SearchSpace& space, uint64_t seed, int64_t trial) {
  const int64_t grid = GridSize(space);
  if (grid > 0 && grid <= kMaxPermutedGrid && trial >= 0 && trial < grid) {
    return GridPoint(space, PermutedIndex(seed, grid, trial));
  }
  Hyperparameters values;
  for (size_t d = 0; d < space.dimensions.size(); ++d) {
    values.emplace_back(space.dimensions[d].field,
                        Draw(space.dimensions[d], Uniform01(seed, trial, d)));
  }
  return values;
}

int64_t GridSize(const SearchSpace& space) {
  int64_t size = 1;
  for (const SearchDimension& d : space.dimensions) {
    if (d.kind != SearchDimension::Kind::kChoice) return 0;
    const int64_t n = static_cast<int64_t>(d.choices.size());
    if (size > std::numeric_limits<int64_t>::max() / n) return std::numeric_limits<int64_t>::max();
    size *= n;
  }
  return size;
}

Hyperparameters GridPoint(const SearchSpace& space, int64_t index) {
  Hyperparameters values(space.dimensions.size());
  for (size_t i = space.dimensions.size(); i-- > 0;) {
    const SearchDimension& d = space.dimensions[i];
    const int64_t n = static_cast<int64_t>(d.choices.size());
    values[i] = {d.field, d.choices[index % n]};
    index /= n;
  }
  return values;
}

absl::StatusOr<std::string> TrialManifest(std::string_view base, const Hyperparameters& values,
                                          const std::string& name) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(base));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the base job is not valid YAML or JSON: ", Printable(e.msg)));
  }
  if (!doc.IsMap()) return absl::InvalidArgumentError("the base job must be a mapping");
  if (!name.empty()) doc["name"] = name;
  for (const auto& [field, value] : values) {
    const std::vector<std::string> parts = absl::StrSplit(field, '.');
    YAML::Node node = doc;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!node[parts[i]].IsMap()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
      YAML::Node child = node[parts[i]];
      node.reset(child);
    }
    node[parts.back()] = YAML::Load(value);  // a choice may be a list: [64, 32]
  }
  YAML::Emitter out;
  out << doc;
  std::string manifest = out.c_str();
  std::vector<FieldError> errors;
  if (!ParseManifest(manifest, &errors).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid job: ", Listed(errors)));
  }
  return manifest;
}

absl::Status CheckSpaceAgainstBase(std::string_view base, const SearchSpace& space,
                                   const std::string& path) {
  if (absl::StatusOr<std::string> alone = TrialManifest(base, {}, ""); !alone.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the base job: ", alone.status().message()));
  }
  std::vector<FieldError> problems;
  for (const SearchDimension& d : space.dimensions) {
    for (const std::string& value : Extremes(d)) {
      absl::StatusOr<std::string> manifest = TrialManifest(base, {{d.field, value}}, "");
      if (!manifest.ok()) {
        problems.push_back(
            {Join(path, d.field),
             absl::StrCat("the value ", Printable(value), " makes ", manifest.status().message())});
        break;  // one problem per dimension
      }
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(Listed(problems));
}

}  // namespace weft
