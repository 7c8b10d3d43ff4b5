#include "control/artifacts.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/ids.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/text.h"

namespace weft {
namespace {

constexpr char kUploadPrefix[] = ".upload-";

// Tenant names are checked when the tenant is made (lower-case letters, digits, '-'); this only
// guards the path derived from one.
absl::Status CheckTenant(const std::string& tenant) {
  if (tenant.empty() || tenant.find_first_of("/.") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifacts belong to a tenant; '", tenant, "' is not one"));
  }
  return absl::OkStatus();
}

bool IsDigest(std::string_view name) {
  if (name.size() != 64) return false;
  for (char c : name) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace

Artifacts::Upload::~Upload() {
  if (committed_) return;
  if (file_) file_->Close().IgnoreError();
  env_.RemoveFile(tmp_).IgnoreError();
}

absl::Status Artifacts::Upload::Append(std::string_view data) {
  if (!error_.ok()) return error_;
  if (bytes_ + static_cast<int64_t>(data.size()) > max_bytes_) {
    error_ = absl::OutOfRangeError(absl::StrCat("the artifact is over the ", FormatMib(max_bytes_),
                                                " weftd accepts (weftd --max-artifact-mb)"));
    return error_;
  }
  if (absl::Status s = file_->Append(data); !s.ok()) {
    error_ = s;
    return s;
  }
  hash_.Update(data);
  bytes_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

Artifacts::Artifacts(Store& store, Env& env, std::string data_dir, const Clock& clock,
                     ArtifactLimits limits)
    : store_(store),
      env_(env),
      root_(std::move(data_dir) + "/artifacts"),
      clock_(clock),
      limits_(limits) {}

std::string Artifacts::TenantDir(const std::string& tenant) const {
  return absl::StrCat(root_, "/", tenant);
}

std::string Artifacts::PathOf(const ArtifactRecord& a) const {
  return absl::StrCat(TenantDir(a.tenant), "/", a.sha256);
}

absl::StatusOr<std::unique_ptr<Artifacts::Upload>> Artifacts::Begin(const std::string& tenant,
                                                                    const std::string& name,
                                                                    int64_t declared_bytes) {
  RETURN_IF_ERROR(CheckTenant(tenant));
  if (absl::Status s = CheckArtifactName(name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("artifact name ", s.message()));
  }
  if (declared_bytes > limits_.max_bytes) {
    return absl::OutOfRangeError(absl::StrCat("the artifact (", FormatMib(declared_bytes),
                                              ") is over the ", FormatMib(limits_.max_bytes),
                                              " weftd accepts (weftd --max-artifact-mb)"));
  }
  if (declared_bytes > 0) {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(int64_t used, BytesUsedLocked(tenant));
    if (used + declared_bytes > limits_.tenant_bytes) {
      return absl::OutOfRangeError(absl::StrCat(
          "tenant '", tenant, "' has ", FormatMib(used), " of artifacts; ",
          FormatMib(declared_bytes), " more is over its ", FormatMib(limits_.tenant_bytes),
          " (weftd --tenant-artifact-mb); delete some first"));
    }
  }
  const std::string dir = TenantDir(tenant);
  RETURN_IF_ERROR(env_.MakeDirs(dir));
  const std::string tmp = absl::StrCat(dir, "/", kUploadPrefix, NewTokenId().substr(4));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env_.NewWritableFile(tmp, 0600));
  return std::unique_ptr<Upload>(
      new Upload(env_, tenant, name, dir, tmp, std::move(file), limits_.max_bytes));
}

absl::StatusOr<Artifacts::Committed> Artifacts::Commit(std::unique_ptr<Upload> u) {
  RETURN_IF_ERROR(u->error_);
  RETURN_IF_ERROR(u->file_->Sync());
  RETURN_IF_ERROR(u->file_->Close());
  u->file_.reset();
  ArtifactRecord a{u->tenant_, u->name_, u->hash_.HexDigest(), u->bytes_, clock_.NowMs()};
  const std::string path = PathOf(a);

  absl::MutexLock lock(&mu_);
  absl::StatusOr<ArtifactRecord> before = store_.GetArtifact(a.tenant, a.name);
  if (!before.ok() && !absl::IsNotFound(before.status())) return before.status();
  const bool stored = env_.FileSize(path).ok();
  if (!stored) {
    ASSIGN_OR_RETURN(int64_t used, BytesUsedLocked(a.tenant));
    // What the name pointed at is freed only if no other name keeps it; count it as still used.
    if (used + a.bytes > limits_.tenant_bytes) {
      return absl::OutOfRangeError(
          absl::StrCat("tenant '", a.tenant, "' has ", FormatMib(used), " of artifacts; ",
                       FormatMib(a.bytes), " more is over its ", FormatMib(limits_.tenant_bytes),
                       " (weftd --tenant-artifact-mb); delete some first"));
    }
    RETURN_IF_ERROR(env_.RenameFile(u->tmp_, path));
    RETURN_IF_ERROR(env_.SyncDir(u->dir_));
  }  // else: the same content is stored already; the upload's file goes with `u`
  u->committed_ = !stored;
  if (absl::Status s = store_.PutArtifact(a); !s.ok()) {
    if (!stored) env_.RemoveFile(path).IgnoreError();  // nobody else can have named it meanwhile
    return s;
  }
  if (before.ok() && before->sha256 != a.sha256) RemoveIfUnnamedLocked(a.tenant, before->sha256);
  return Committed{a, !before.ok()};
}

absl::StatusOr<ArtifactRecord> Artifacts::Get(const std::string& tenant, const std::string& name) {
  return store_.GetArtifact(tenant, name);
}

absl::StatusOr<std::vector<ArtifactRecord>> Artifacts::List(const std::string& tenant) {
  return store_.ListArtifacts(tenant);
}

absl::StatusOr<int64_t> Artifacts::BytesUsed(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  return BytesUsedLocked(tenant);
}

absl::StatusOr<int64_t> Artifacts::BytesUsedLocked(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::vector<ArtifactRecord> all, store_.ListArtifacts(tenant));
  absl::flat_hash_set<std::string> seen;
  int64_t used = 0;
  for (const ArtifactRecord& a : all) {
    if (seen.insert(a.sha256).second) used += a.bytes;
  }
  return used;
}

void Artifacts::RemoveIfUnnamedLocked(const std::string& tenant, const std::string& sha256) {
  auto all = store_.ListArtifacts(tenant);
  if (!all.ok()) return;  // keep it: RemoveUnnamed clears it at the next start
  for (const ArtifactRecord& a : *all) {
    if (a.sha256 == sha256) return;
  }
  ArtifactRecord gone{tenant, "", sha256, 0, 0};
  if (absl::Status s = env_.RemoveFile(PathOf(gone)); !s.ok()) {
    spdlog::warn("artifacts of {}: {}", tenant, s.message());
  }
}

absl::Status Artifacts::Delete(const std::string& tenant, const std::string& name) {
  RETURN_IF_ERROR(CheckTenant(tenant));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ArtifactRecord a, store_.GetArtifact(tenant, name));
  // Forget the name first: a crash before the file goes leaves an unnamed content, never a name
  // without its content.
  ASSIGN_OR_RETURN(int64_t left, store_.DeleteArtifact(tenant, name));
  if (left == 0) {
    if (absl::Status s = env_.RemoveFile(PathOf(a)); !s.ok()) {
      spdlog::warn("artifacts of {}: {}", tenant, s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status Artifacts::RemoveTenant(const std::string& tenant) {
  RETURN_IF_ERROR(CheckTenant(tenant));
  absl::MutexLock lock(&mu_);
  return env_.RemoveAll(TenantDir(tenant));
}

absl::Status Artifacts::RemoveUnnamed() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<TenantRecord> tenants, store_.ListTenants());
  absl::flat_hash_set<std::string> known;
  for (const TenantRecord& t : tenants) known.insert(t.name);
  // Only the tenants the store has: the directory of one deleted by a weftd that crashed before
  // removing its files holds nothing anyone can name; Tenancy::Create removes it before a new
  // tenant takes the name.
  for (const std::string& tenant : known) {
    ASSIGN_OR_RETURN(std::vector<std::string> files, env_.ListFiles(TenantDir(tenant)));
    if (files.empty()) continue;
    ASSIGN_OR_RETURN(std::vector<ArtifactRecord> named, store_.ListArtifacts(tenant));
    absl::flat_hash_set<std::string> keep;
    for (const ArtifactRecord& a : named) keep.insert(a.sha256);
    for (const std::string& f : files) {
      if (IsDigest(f) && keep.contains(f)) continue;
      const std::string path = absl::StrCat(TenantDir(tenant), "/", f);
      if (absl::Status s = env_.RemoveFile(path); !s.ok()) return s;
      spdlog::info("artifacts of {}: removed {}, which no name points at", tenant, path);
    }
  }
  return absl::OkStatus();
}

}  // namespace weft
