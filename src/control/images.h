// Container images jobs run on (issue 40): the admin's, registered from a file on weftd's host
// and granted to tenants as a data set is (weft image add NAME --path FILE --tenants a,b|all),
// and each tenant's own, imported from an archive it uploaded as an artifact (weft image add NAME
// --from FILE). An archive is an OCI image layout (podman save --format oci-archive), a Docker
// archive, or a root file system tarball (control/image_archive.h). It is imported into the
// container engine under a name weft gives it — localhost/weft/<owner>/<name>:<digest> — never
// the names the archive carries (skopeo copy, podman import): a tenant's archive cannot take
// over another image's name. An archive already imported by its owner (the same SHA-256) is not
// imported again. A tenant's images count against its disk quota; another tenant's image answers
// as a missing one.
//
// Errors: InvalidArgument naming the field (name, artifact, path, tenants) and what is wrong;
// NotFound for an image the caller may not see ("no image 'x'"); ResourceExhausted at the
// tenant's disk quota; FailedPrecondition when weftd runs no container engine; Internal when the
// engine refuses (its message).
//
// Thread-safety: safe to call from many threads; imports and deletions are serialized.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "control/artifacts.h"
#include "control/disk_quota.h"
#include "executor/container_runtime.h"
#include "job/job.h"
#include "job/job_spec.h"
#include "store/store.h"

namespace weft {

// Why there are no images on a weftd without podman: the message of every refusal.
inline constexpr char kNoImageEngine[] =
    "this weftd runs learners without an image engine (weftd --runtime bwrap or none): no images";

class Images {
 public:
  // `podman` (borrowed; null when weftd runs learners without podman: images are then refused) is
  // the engine images go to; `artifacts` and `quota` borrowed, may be null. The engine names this
  // weftd's images under localhost/weft/<installation>/ (weftd's: a hash of its data directory),
  // so that another weftd on the same host, sharing the engine's storage, neither removes them
  // as unreferenced nor has its own removed.
  Images(Store& store, const PodmanRuntime* podman, Artifacts* artifacts, DiskQuota* quota,
         const Clock& clock, std::string installation);

  // The tenant `tenant`'s own image `name`, imported from its artifact `artifact`. `errors` gets
  // (field, problem) for InvalidArgument.
  absl::StatusOr<ImageRecord> ImportArtifact(const std::string& tenant, const std::string& name,
                                             const std::string& artifact,
                                             std::vector<FieldError>* errors);
  // The admin's image `name`, imported from `path` on weftd's host (absolute) and granted to
  // `tenants` (or every tenant with `all_tenants`).
  absl::StatusOr<ImageRecord> ImportPath(const std::string& name, const std::string& path,
                                         bool all_tenants, const std::vector<std::string>& tenants,
                                         std::vector<FieldError>* errors);

  // The image `name` as `tenant` may run jobs on it: its own, else the admin's granted to it.
  // NotFound alike whether it does not exist or is not the tenant's to use.
  absl::StatusOr<ImageRecord> Resolve(const std::string& tenant, const std::string& name);
  // The owner's ("" the admin) image `name` as stored. NotFound when there is none.
  absl::StatusOr<ImageRecord> Get(const std::string& owner, const std::string& name) {
    return store_.GetImage(owner, name);
  }
  // The images `tenant` may use (its own, then the admin's granted to it); for the admin ("")
  // every image.
  absl::StatusOr<std::vector<ImageRecord>> List(const std::string& tenant);
  // Removes the owner's ("" the admin) image `name`; the engine forgets it once no other name
  // points at it and no container runs on it. NotFound.
  absl::Status Delete(const std::string& owner, const std::string& name);
  // Removes from the engine the images under localhost/weft/<installation>/ no record names (left
  // by a deletion while a container ran, or by an import a crash cut short). weft's runtime image
  // is kept. Returns how many went.
  int RemoveUnreferenced(const std::string& keep);

  bool enabled() const { return podman_ != nullptr; }

 private:
  // Imports `file` (its SHA-256 `digest`, `format` read from it) for `owner` as `name`.
  absl::StatusOr<ImageRecord> ImportLocked(ImageRecord record, const std::string& file)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the engine's `argv` (podman or skopeo); its output, Internal when it fails.
  absl::StatusOr<std::string> Engine(const std::vector<std::string>& argv) const;

  Store& store_;
  const PodmanRuntime* const podman_;
  Artifacts* const artifacts_;
  DiskQuota* const quota_;
  const Clock& clock_;
  const std::string installation_;
  absl::Mutex mu_;
};

// The engine's name weft gives an image: localhost/weft/<installation>/<owner or "admin">/<name>:
// <first 16 of its digest>. Lower-case, as image names must be.
std::string ImageReference(const std::string& installation, const std::string& owner,
                           const std::string& name, const std::string& digest);

}  // namespace weft
