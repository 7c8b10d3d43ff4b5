// The files tenants upload for their jobs (issue 13: TorchScript models, code archives, small data
// sets). Each tenant's contents are stored once, under their SHA-256, however many names point at
// them:
//
//   <data_dir>/artifacts/<tenant>/<sha256>            the content (mode 0600)
//   <data_dir>/artifacts/<tenant>/.upload-<random>    an upload in progress
//
// and the store keeps the names (Store::PutArtifact). An upload streams to a temporary file, hashed
// on the way, and is renamed to its digest only when complete: a crash leaves a temporary file or
// an unnamed content, never a name without its content; RemoveUnnamed clears both at start-up.
//
// Errors: InvalidArgument for a bad name (naming what is wrong); OutOfRange when an artifact is
// over ArtifactLimits::max_bytes or would take the tenant past ArtifactLimits::tenant_bytes (the
// REST API answers 413); NotFound for a name the tenant does not have (another tenant's included);
// ResourceExhausted for a full disk; Internal for other I/O errors.
//
// Thread-safety: safe to call from many threads; committing and deleting are serialized, so the
// quota holds and no content is removed while a new name is given to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/files.h"
#include "job/job_spec.h"  // CheckArtifactName
#include "store/store.h"

namespace weft {

struct ArtifactLimits {
  int64_t max_bytes = int64_t{256} << 20;   // one artifact, bytes (weftd --max-artifact-mb)
  int64_t tenant_bytes = int64_t{2} << 30;  // a tenant's distinct contents together, bytes
};

class Artifacts {
 public:
  // An upload under way: its bytes go to a temporary file as they arrive. Destroying an upload
  // that was not committed removes its file.
  class Upload {
   public:
    ~Upload();
    // Appends the next piece. OutOfRange once the upload passes ArtifactLimits::max_bytes (the
    // upload is then dead: commit refuses it); disk errors as for Env.
    absl::Status Append(std::string_view data);
    int64_t bytes() const { return bytes_; }

   private:
    friend class Artifacts;
    Upload(Env& env, std::string tenant, std::string name, std::string dir, std::string tmp,
           std::unique_ptr<WritableFile> file, int64_t max_bytes)
        : env_(env),
          tenant_(std::move(tenant)),
          name_(std::move(name)),
          dir_(std::move(dir)),
          tmp_(std::move(tmp)),
          file_(std::move(file)),
          max_bytes_(max_bytes) {}
    Env& env_;
    const std::string tenant_, name_, dir_, tmp_;
    std::unique_ptr<WritableFile> file_;
    const int64_t max_bytes_;
    Sha256Stream hash_;
    int64_t bytes_ = 0;
    absl::Status error_;
    bool committed_ = false;
  };

  Artifacts(Store& store, Env& env, std::string data_dir, const Clock& clock,
            ArtifactLimits limits = {});

  const ArtifactLimits& limits() const { return limits_; }

  // Starts an upload of `name` for `tenant`. `declared_bytes` (the request's Content-Length, or
  // -1 when it is not known) is checked against both limits now, so an upload that cannot fit is
  // refused before a byte is read.
  absl::StatusOr<std::unique_ptr<Upload>> Begin(const std::string& tenant, const std::string& name,
                                                int64_t declared_bytes);
  // Makes the upload durable and gives it its name (replacing what the name pointed at, whose
  // content is removed if no other name keeps it). The second member is true if the name is new.
  struct Committed {
    ArtifactRecord artifact;
    bool created = false;
  };
  absl::StatusOr<Committed> Commit(std::unique_ptr<Upload> upload);

  absl::StatusOr<ArtifactRecord> Get(const std::string& tenant, const std::string& name);
  absl::StatusOr<std::vector<ArtifactRecord>> List(const std::string& tenant);
  // Bytes the tenant's distinct contents take.
  absl::StatusOr<int64_t> BytesUsed(const std::string& tenant);
  // Where the content of `artifact` lives.
  std::string PathOf(const ArtifactRecord& artifact) const;
  // Where `tenant`'s contents live: <data_dir>/artifacts/<tenant>.
  std::string TenantDir(const std::string& tenant) const;
  // Forgets the name; removes the content when no other name of the tenant points at it.
  absl::Status Delete(const std::string& tenant, const std::string& name);
  // Removes the directory of a tenant the store no longer has.
  absl::Status RemoveTenant(const std::string& tenant);
  // Removes, for every tenant, temporary files and contents no name points at: what a crash
  // between writing and naming, or between forgetting and removing, left behind. At start-up,
  // before the API serves.
  absl::Status RemoveUnnamed();

 private:
  absl::StatusOr<int64_t> BytesUsedLocked(const std::string& tenant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the content `sha256` of `tenant` if no name points at it any more.
  void RemoveIfUnnamedLocked(const std::string& tenant, const std::string& sha256)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store& store_;
  Env& env_;
  const std::string root_;  // <data_dir>/artifacts
  const Clock& clock_;
  const ArtifactLimits limits_;
  absl::Mutex mu_;
};

}  // namespace weft
