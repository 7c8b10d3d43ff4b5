// Data sets: what the admin registers (weft dataset add; POST /v1/datasets) and manifests name
// (data.dataset), so that a tenant never names a host path. A name resolves to a directory only
// for the tenants the admin granted it to; to every other tenant it does not exist.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "control/tenancy.h"
#include "job/job.h"
#include "job/job_spec.h"
#include "store/store.h"

namespace weft {

// The formats a data set may have, each with the files its directory holds (what the learner
// reads from them: train/dataset.h):
//   idx:     train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
//            t10k-labels-idx1-ubyte, each plain or .gz (MNIST's layout);
//   csv:     train.csv and test.csv (a header row; numeric features, then the class id in a last
//            column named label);
//   tensors: data.pt, from torch.save({"train_x", "train_y", "test_x", "test_y"}).
inline const std::vector<std::string>& DatasetFormats() {
  static const std::vector<std::string> formats = {"idx", "csv", "tensors"};
  return formats;
}

// Checks a registration before it is stored: `name` by CheckArtifactName's rule, `path` an
// absolute, lexically normal directory (no "." or ".." parts) holding the files of `format`
// (regular files, not symbolic links, readable by others and the directory searchable: a
// learner's container sees only that directory, and reads it as its job's own uid),
// `format` one of DatasetFormats(), and each of `tenants` an existing tenant. InvalidArgument with
// `errors` filled (field: name, path, format or tenants; problem); errors of the store as they are.
absl::Status CheckDataset(const DatasetRecord& dataset, Store& store,
                          std::vector<FieldError>* errors);

// The data set `name` as `tenant` may use it. NotFound with the same message whether it does not
// exist or is not granted to `tenant` ("no data set 'x'; weft dataset list shows yours").
absl::StatusOr<DatasetRecord> ResolveDataset(Store& store, const std::string& name,
                                             const std::string& tenant);

// The data sets as the API manages them (the admin registers and removes) and shows them (a
// tenant sees those granted to it; to it the others do not exist). Errors of the store come back
// as they are. Safe to call from any thread; it holds no state.
class Datasets {
 public:
  // `store` and `clock` (which stamps registrations) are borrowed.
  Datasets(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  // Every data set for the admin; those `caller`'s tenant may use for a tenant.
  absl::StatusOr<std::vector<DatasetRecord>> List(const Caller& caller) const;
  // Data set `name` as `caller` may see it. NotFound as ResolveDataset for a tenant.
  absl::StatusOr<DatasetRecord> Get(const Caller& caller, const std::string& name) const;
  // Checks `dataset` (CheckDataset: InvalidArgument with `errors` filled) and stores it, stamped
  // now. AlreadyExists when its name is taken (a registration is not changed in place).
  absl::Status Register(DatasetRecord* dataset, std::vector<FieldError>* errors);
  // NotFound when there is no data set `name`.
  absl::Status Delete(const std::string& name);

 private:
  Store& store_;
  const Clock& clock_;
};

// Registers, for every tenant, each of Debian's data sets (dataset-fashion-mnist: fashion-mnist,
// dataset-mnist: mnist) whose directory under `root` holds its IDX files, unless a data set of
// that name exists. Answers the names registered now. Errors of the store.
absl::StatusOr<std::vector<std::string>> RegisterDefaultDatasets(
    Store& store, const Clock& clock, const std::string& root = "/usr/share/datasets");

}  // namespace weft
