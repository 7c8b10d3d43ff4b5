// ReadGpus and DiscoverCdiGpus (daemon/gpu_inventory.h).
#include "daemon/gpu_inventory.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/text.h"

namespace weft::daemon {
namespace {

constexpr int kMaxIndex = 1023;
constexpr size_t kMaxModelBytes = 128;

// A CDI device name's index: "3" or "gpu3" (letters, then digits); nullopt for "all", a UUID.
std::optional<int> IndexOfName(const std::string& name) {
  static const std::regex kIndexed("[A-Za-z_]*([0-9]{1,4})");
  std::smatch m;
  int index = -1;
  if (!std::regex_match(name, m, kIndexed) || !absl::SimpleAtoi(m[1].str(), &index) ||
      index > kMaxIndex) {
    return std::nullopt;
  }
  return index;
}

// A CDI device name "vendor/class=name" (CDI's own syntax: vendor a domain, class and name
// [A-Za-z0-9_.-]).
bool IsCdiName(const std::string& s) {
  static const std::regex kCdi(
      R"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9][-A-Za-z0-9_.]*=[A-Za-z0-9][-A-Za-z0-9_.:]*)");
  return s.size() <= 256 && std::regex_match(s, kCdi);
}

}  // namespace

absl::StatusOr<std::vector<scheduler::GpuDevice>> ReadGpus(const YAML::Node& gpus,
                                                           const std::string& where) {
  std::vector<scheduler::GpuDevice> out;
  if (!gpus || gpus.IsNull()) return out;
  const std::string field = absl::StrCat(where, ".gpus");
  if (gpus.IsScalar()) {
    int n = -1;
    if (!absl::SimpleAtoi(gpus.Scalar(), &n) || n < 0 || n > kMaxIndex + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": a count in [0, ", kMaxIndex + 1, "] or a list of {index, cdi}"));
    }
    return scheduler::CountedGpus(n);
  }
  if (!gpus.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": a count or a list of {index, cdi}"));
  }
  std::set<int> seen;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const YAML::Node g = gpus[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (!g.IsMap()) return absl::InvalidArgumentError(absl::StrCat(at, ": {index, cdi, model}"));
    for (const auto& kv : g) {
      const std::string key = kv.first.as<std::string>("");
      if (key != "index" && key != "cdi" && key != "model") {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".", Printable(key), ": unknown; expected index, cdi, model"));
      }
    }
    scheduler::GpuDevice d;
    if (!g["index"] || !g["index"].IsScalar() || !absl::SimpleAtoi(g["index"].Scalar(), &d.index) ||
        d.index < 0 || d.index > kMaxIndex) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".index: an integer in [0, ", kMaxIndex, "] is required"));
    }
    if (!seen.insert(d.index).second) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".index: ", d.index, " is listed twice"));
    }
    if (g["cdi"]) {
      d.cdi = g["cdi"].as<std::string>("");
      if (!IsCdiName(d.cdi)) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".cdi: a CDI device name vendor/class=name (e.g. nvidia.com/gpu=0), got '",
            Printable(d.cdi), "'"));
      }
    }
    if (g["model"]) {
      d.model = g["model"].as<std::string>("");
      if (d.model.size() > kMaxModelBytes || !TextProblem(d.model).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".model: printable text of at most ", kMaxModelBytes, " bytes"));
      }
    }
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return out;
}

std::vector<scheduler::GpuDevice> DiscoverCdiGpus(const std::vector<std::string>& dirs,
                                                  std::vector<std::string>* warnings) {
  std::vector<scheduler::GpuDevice> out;
  std::set<int> seen;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::vector<std::filesystem::path> specs;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        specs.push_back(entry.path());
      }
    }
    std::sort(specs.begin(), specs.end());
    for (const auto& path : specs) {
      try {
        // YAML is a superset of JSON: one reader for both forms of a spec.
        const YAML::Node spec = YAML::LoadFile(path.string());
        const std::string kind = spec["kind"].as<std::string>("");
        if (!absl::EndsWith(kind, "/gpu") || !spec["devices"] || !spec["devices"].IsSequence()) {
          continue;
        }
        for (const YAML::Node& device : spec["devices"]) {
          const std::string name = device["name"].as<std::string>("");
          std::optional<int> index = IndexOfName(name);
          const std::string cdi = absl::StrCat(kind, "=", name);
          if (!index || !IsCdiName(cdi) || !seen.insert(*index).second) continue;
          out.push_back({*index, cdi, ""});
        }
      } catch (const YAML::Exception& e) {
        warnings->push_back(absl::StrCat("CDI spec ", path.string(), " left out: ", e.what()));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return out;
}

}  // namespace weft::daemon
