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

// What is wrong with `dir` as a data set of `format`, or "" when nothing is: a file the format
// holds is missing, or a learner could not read it — its container sees only the data set's own
// directory (a symbolic link to elsewhere leads nowhere there) and reads it as its job's own uid,
// so the directory must be searchable and the files readable by others.
std::string DatasetProblem(const std::string& dir, const std::string& format) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if ((fs::status(dir, ec).permissions() & (fs::perms::others_read | fs::perms::others_exec)) !=
      (fs::perms::others_read | fs::perms::others_exec)) {
    return absl::StrCat("'", dir,
                        "' is not readable by others: learners read it as their job's "
                        "own uid (chmod o+rx)");
  }
  // Each file the format holds, with the names it may go by (an IDX file plain or gzipped).
  std::vector<std::vector<std::string>> files;
  if (format == "idx") {
    for (const char* f : kIdxFiles) files.push_back({f, absl::StrCat(f, ".gz")});
  } else if (format == "csv") {
    files = {{"train.csv"}, {"test.csv"}};
  } else {
    files = {{kTensorFileName}};
  }
  for (const std::vector<std::string>& names : files) {
    const std::string* found = nullptr;
    for (const std::string& n : names) {
      if (fs::exists(fs::symlink_status(absl::StrCat(dir, "/", n), ec))) found = &n;
    }
    if (found == nullptr) {
      return absl::StrCat("'", dir, "' has no ", names[0], names.size() > 1 ? "[.gz]" : "",
                          ", which a ", format, " data set holds");
    }
    const fs::file_status st = fs::symlink_status(absl::StrCat(dir, "/", *found), ec);
    if (fs::is_symlink(st)) {
      return absl::StrCat("'", *found, "' is a symbolic link: a learner's container sees only ",
                          "the data set's own directory (copy or hard-link the file into it)");
    }
    if (!fs::is_regular_file(st)) return absl::StrCat("'", *found, "' is not a regular file");
    if ((st.permissions() & fs::perms::others_read) == fs::perms::none) {
      return absl::StrCat("'", *found, "' is not readable by others: learners read it as their ",
                          "job's own uid (chmod o+r)");
    }
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
    if (std::string problem = DatasetProblem(d.path, d.format); !problem.empty()) {
      errors->push_back({"path", problem});
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
    if (!DatasetProblem(dir, "idx").empty()) continue;
    absl::StatusOr<DatasetRecord> existing = store.GetDataset(name);
    if (existing.ok()) continue;
    if (!absl::IsNotFound(existing.status())) return existing.status();
    DatasetRecord d{name, dir, "idx", /*all_tenants=*/true, {}, clock.NowMs()};
    if (absl::Status s = store.PutDataset(d); !s.ok()) return s;
    registered.push_back(name);
  }
  return registered;
}

absl::StatusOr<std::vector<DatasetRecord>> Datasets::List(const Caller& caller) const {
  absl::StatusOr<std::vector<DatasetRecord>> all = store_.ListDatasets();
  if (!all.ok() || caller.admin) return all;
  std::vector<DatasetRecord> usable;
  for (DatasetRecord& d : *all) {
    if (d.UsableBy(caller.tenant)) usable.push_back(std::move(d));
  }
  return usable;
}

absl::StatusOr<DatasetRecord> Datasets::Get(const Caller& caller, const std::string& name) const {
  return caller.admin ? store_.GetDataset(name) : ResolveDataset(store_, name, caller.tenant);
}

absl::Status Datasets::Register(DatasetRecord* dataset, std::vector<FieldError>* errors) {
  if (absl::Status st = CheckDataset(*dataset, store_, errors); !st.ok()) return st;
  if (auto existing = store_.GetDataset(dataset->name); existing.ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("data set '", dataset->name, "' exists; delete it first to change it"));
  } else if (!absl::IsNotFound(existing.status())) {
    return existing.status();
  }
  dataset->created_ms = clock_.NowMs();
  return store_.PutDataset(*dataset);
}

absl::Status Datasets::Delete(const std::string& name) { return store_.DeleteDataset(name); }

}  // namespace weft
