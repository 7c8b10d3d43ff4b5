#include "control/datasets.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/text.h"
#include "job/layout.h"

namespace weft {
namespace {

// The files an "idx" data set holds, each plain or gzipped.
constexpr const char* kIdxFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                     "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

// The first file of `format` that `dir` lacks; empty when it has them all.
std::string MissingFile(const std::string& dir, const std::string& format) {
  std::error_code ec;
  if (format == "idx") {
    for (const char* f : kIdxFiles) {
      const std::string plain = absl::StrCat(dir, "/", f);
      if (!std::filesystem::is_regular_file(plain, ec) &&
          !std::filesystem::is_regular_file(plain + ".gz", ec)) {
        return absl::StrCat(f, "[.gz]");
      }
    }
    return "";
  }
  const std::vector<std::string> files = format == "csv"
                                             ? std::vector<std::string>{"train.csv", "test.csv"}
                                             : std::vector<std::string>{kTensorFileName};
  for (const std::string& f : files) {
    if (!std::filesystem::is_regular_file(absl::StrCat(dir, "/", f), ec)) return f;
  }
  return "";
}

}  // namespace

absl::Status CheckDataset(const DatasetRecord& d, Store& store, std::vector<FieldError>* errors) {
  const size_t before = errors->size();
  if (absl::Status s = CheckArtifactName(d.name); !s.ok()) {
    errors->push_back({"name", std::string(s.message())});
  }
  const bool known_format = std::find(DatasetFormats().begin(), DatasetFormats().end(), d.format) !=
                            DatasetFormats().end();
  if (!known_format) {
    errors->push_back({"format", absl::StrCat("unknown '", Printable(d.format), "' (",
                                              absl::StrJoin(DatasetFormats(), ", "), ")")});
  }
  std::error_code ec;
  if (std::string problem = TextProblem(d.path); !problem.empty()) {
    errors->push_back(
        {"path", absl::StrCat("must be UTF-8 text without control characters; it ", problem)});
  } else if (d.path.size() > 4096) {
    errors->push_back({"path", absl::StrCat("is ", d.path.size(), " bytes; at most 4096")});
  } else if (d.path.empty() || d.path[0] != '/' ||
             std::filesystem::path(d.path).lexically_normal().string() != d.path) {
    errors->push_back({"path", absl::StrCat("must be an absolute directory path without '.' or "
                                            "'..' parts or a trailing '/', got '",
                                            d.path, "'")});
  } else if (!std::filesystem::is_directory(d.path, ec)) {
    errors->push_back({"path", absl::StrCat("'", d.path, "' is not a directory weftd can read")});
  } else if (known_format) {
    if (std::string missing = MissingFile(d.path, d.format); !missing.empty()) {
      errors->push_back({"path", absl::StrCat("'", d.path, "' has no ", missing, ", which a ",
                                              d.format, " data set holds")});
    }
  }
  if (d.all_tenants && !d.tenants.empty()) {
    errors->push_back({"tenants", "is either \"all\" or a list of tenants, not both"});
  }
  for (const std::string& t : d.tenants) {
    absl::StatusOr<TenantRecord> tenant = store.GetTenant(t);
    if (absl::IsNotFound(tenant.status())) {
      errors->push_back({"tenants", absl::StrCat("no tenant '", Printable(t), "'")});
    } else if (!tenant.ok()) {
      return tenant.status();
    }
  }
  if (errors->size() == before) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat((*errors)[before].field, ": ", (*errors)[before].problem));
}

absl::StatusOr<DatasetRecord> ResolveDataset(Store& store, const std::string& name,
                                             const std::string& tenant) {
  absl::StatusOr<DatasetRecord> d = store.GetDataset(name);
  if (d.ok() && d->UsableBy(tenant)) return d;
  if (!d.ok() && !absl::IsNotFound(d.status())) return d.status();
  return absl::NotFoundError(
      absl::StrCat("no data set '", name, "'; weft dataset list shows yours"));
}

absl::StatusOr<std::vector<std::string>> RegisterDefaultDatasets(Store& store, const Clock& clock,
                                                                 const std::string& root) {
  std::vector<std::string> registered;
  for (const char* name : {"fashion-mnist", "mnist"}) {
    const std::string dir = absl::StrCat(root, "/", name);
    if (!MissingFile(dir, "idx").empty()) continue;
    absl::StatusOr<DatasetRecord> existing = store.GetDataset(name);
    if (existing.ok()) continue;
    if (!absl::IsNotFound(existing.status())) return existing.status();
    DatasetRecord d{name, dir, "idx", /*all_tenants=*/true, {}, clock.NowMs()};
    if (absl::Status s = store.PutDataset(d); !s.ok()) return s;
    registered.push_back(name);
  }
  return registered;
}

}  // namespace weft
