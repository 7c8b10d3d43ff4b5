#include "control/images.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "control/image_archive.h"

namespace weft {
namespace {

constexpr int64_t kImportTimeoutMs = 30 * 60 * 1000;  // a large image on a slow disk
constexpr char kPrefix[] = "localhost/weft/";
constexpr int kEngineUmask = 022;

// A path component an image name may hold: lower-case letters and digits of `s`, then a short
// hash of `s` itself (names that differ only in case or punctuation stay apart).
std::string Component(const std::string& prefix, const std::string& s) {
  std::string out = prefix;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += absl::ascii_tolower(c);
  }
  return absl::StrCat(out, "-", Sha256Hex(s).substr(0, 6));
}

absl::Status Field(std::vector<FieldError>* errors, const std::string& field,
                   absl::string_view problem) {
  if (errors != nullptr) errors->push_back({field, std::string(problem)});
  return absl::InvalidArgumentError(absl::StrCat("invalid image: ", field, ": ", problem));
}

// SHA-256 of the file at `path`, read in pieces.
absl::StatusOr<std::string> DigestOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  Sha256Stream hash;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    hash.Update(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  return hash.HexDigest();
}

std::string NoImage(const std::string& name) {
  return absl::StrCat("no image '", name, "'; `weft image list` shows yours");
}

}  // namespace

std::string ImageReference(const std::string& installation, const std::string& owner,
                           const std::string& name, const std::string& digest) {
  return absl::StrCat(kPrefix, Component("w-", installation), "/",
                      owner.empty() ? "admin" : Component("t-", owner), "/",
                      Component("img-", name), ":", digest.substr(0, 16));
}

Images::Images(Store& store, const PodmanRuntime* podman, Artifacts* artifacts, DiskQuota* quota,
               const Clock& clock, std::string installation)
    : store_(store),
      podman_(podman),
      artifacts_(artifacts),
      quota_(quota),
      clock_(clock),
      installation_(std::move(installation)) {}

absl::StatusOr<std::string> Images::Engine(const std::vector<std::string>& argv) const {
  // The engine's own umask, not weftd's (077): the image's directories it creates (the root of
  // a layer the archive gives no mode for) must be open to the containers' uids.
  absl::StatusOr<CommandResult> r =
      RunCommand(argv, podman_->EngineEnvironment(), kImportTimeoutMs, "", kEngineUmask);
  if (!r.ok()) return absl::InternalError(r.status().message());
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat(argv[0].substr(argv[0].rfind('/') + 1), " ", argv[1],
                                            " failed: ", absl::StripAsciiWhitespace(r->output)));
  }
  return r->output;
}

absl::StatusOr<ImageRecord> Images::ImportLocked(ImageRecord record, const std::string& file) {
  // One archive of its owner's is imported once, whatever names it is given.
  ASSIGN_OR_RETURN(std::vector<ImageRecord> all, store_.ListImages());
  auto same = std::find_if(all.begin(), all.end(), [&](const ImageRecord& i) {
    return i.tenant == record.tenant && i.digest == record.digest;
  });
  if (same != all.end()) {
    record.reference = same->reference;
    record.bytes = same->bytes;
    RETURN_IF_ERROR(store_.PutImage(record));
    return record;
  }
  record.reference = ImageReference(installation_, record.tenant, record.name, record.digest);
  const std::string podman = podman_->options().podman;
  if (record.format == kRootfsArchive) {
    RETURN_IF_ERROR(Engine({podman, "import", "--quiet", file, record.reference}).status());
  } else {
    // skopeo copies the archive's one image under weft's name, and no name the archive carries.
    RETURN_IF_ERROR(
        Engine({"/usr/bin/skopeo", "copy", "--quiet", absl::StrCat(record.format, ":", file),
                absl::StrCat("containers-storage:", record.reference)})
            .status());
  }
  ASSIGN_OR_RETURN(std::string size,
                   Engine({podman, "image", "inspect", "--format", "{{.Size}}", record.reference}));
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(size), &record.bytes)) record.bytes = 0;
  if (absl::Status s = store_.PutImage(record); !s.ok()) {
    (void)Engine({podman, "rmi", record.reference});
    return s;
  }
  spdlog::info("image {} of {} imported as {} ({} bytes, {})", record.name,
               record.tenant.empty() ? "the admin" : "tenant " + record.tenant, record.reference,
               record.bytes, record.format);
  return record;
}

absl::StatusOr<ImageRecord> Images::ImportArtifact(const std::string& tenant,
                                                   const std::string& name,
                                                   const std::string& artifact,
                                                   std::vector<FieldError>* errors) {
  if (podman_ == nullptr) {
    return absl::FailedPreconditionError(kNoImageEngine);
  }
  if (absl::Status s = CheckArtifactName(name); !s.ok()) return Field(errors, "name", s.message());
  if (artifacts_ == nullptr) return absl::FailedPreconditionError("this weftd keeps no artifacts");
  absl::StatusOr<ArtifactRecord> a = artifacts_->Get(tenant, artifact);
  if (!a.ok()) return Field(errors, "artifact", std::string(a.status().message()));
  const std::string file = artifacts_->PathOf(*a);
  absl::StatusOr<std::string> format = ImageArchiveFormat(file);
  if (!format.ok()) {
    return Field(errors, "artifact", absl::StrCat("'", artifact, "' ", format.status().message()));
  }
  if (quota_ != nullptr) {
    quota_->Forget(tenant);  // measured afresh: the archive itself was just uploaded
    RETURN_IF_ERROR(quota_->CheckRoom(tenant, a->bytes));
  }
  ImageRecord record;
  record.tenant = tenant;
  record.name = name;
  record.digest = a->sha256;
  record.format = *format;
  record.created_ms = clock_.NowMs();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(ImageRecord imported, ImportLocked(std::move(record), file));
  if (quota_ != nullptr) quota_->Forget(tenant);
  return imported;
}

absl::StatusOr<ImageRecord> Images::ImportPath(const std::string& name, const std::string& path,
                                               bool all_tenants,
                                               const std::vector<std::string>& tenants,
                                               std::vector<FieldError>* errors) {
  if (podman_ == nullptr) {
    return absl::FailedPreconditionError(kNoImageEngine);
  }
  if (absl::Status s = CheckArtifactName(name); !s.ok()) return Field(errors, "name", s.message());
  struct stat st {};
  if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Field(errors, "path", absl::StrCat("'", path, "' is not a file on weftd's host"));
  }
  for (const std::string& t : tenants) {
    if (!store_.GetTenant(t).ok())
      return Field(errors, "tenants", absl::StrCat("no tenant '", t, "'"));
  }
  absl::StatusOr<std::string> format = ImageArchiveFormat(path);
  if (!format.ok())
    return Field(errors, "path", absl::StrCat(path, " ", format.status().message()));
  ImageRecord record;
  record.name = name;
  record.format = *format;
  record.all_tenants = all_tenants;
  record.tenants = tenants;
  record.created_ms = clock_.NowMs();
  ASSIGN_OR_RETURN(record.digest, DigestOf(path));
  absl::MutexLock lock(&mu_);
  return ImportLocked(std::move(record), path);
}

absl::StatusOr<ImageRecord> Images::Resolve(const std::string& tenant, const std::string& name) {
  absl::StatusOr<ImageRecord> own = store_.GetImage(tenant, name);
  if (own.ok() || !absl::IsNotFound(own.status())) return own;
  absl::StatusOr<ImageRecord> shared = store_.GetImage("", name);
  if (shared.ok() && !shared->UsableBy(tenant)) return absl::NotFoundError(NoImage(name));
  if (!shared.ok() && absl::IsNotFound(shared.status())) return absl::NotFoundError(NoImage(name));
  return shared;
}

absl::StatusOr<std::vector<ImageRecord>> Images::List(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::vector<ImageRecord> all, store_.ListImages());
  if (tenant.empty()) return all;
  std::vector<ImageRecord> out;
  for (const ImageRecord& i : all) {
    if (i.tenant == tenant) out.push_back(i);
  }
  for (const ImageRecord& i : all) {
    if (i.tenant.empty() && i.UsableBy(tenant)) out.push_back(i);
  }
  return out;
}

absl::Status Images::Delete(const std::string& owner, const std::string& name) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<ImageRecord> image = store_.GetImage(owner, name);
  if (absl::IsNotFound(image.status())) return absl::NotFoundError(NoImage(name));
  if (!image.ok()) return image.status();
  RETURN_IF_ERROR(store_.DeleteImage(owner, name));
  if (quota_ != nullptr && !owner.empty()) quota_->Forget(owner);
  ASSIGN_OR_RETURN(std::vector<ImageRecord> all, store_.ListImages());
  const bool named = std::any_of(all.begin(), all.end(), [&](const ImageRecord& i) {
    return i.reference == image->reference;
  });
  if (!named && podman_ != nullptr) {
    // A container still running on it keeps it: RemoveUnreferenced takes it at the next start.
    absl::StatusOr<std::string> gone = Engine({podman_->options().podman, "rmi", image->reference});
    if (!gone.ok())
      spdlog::warn("image {} is kept for now: {}", image->reference, gone.status().message());
  }
  return absl::OkStatus();
}

int Images::RemoveUnreferenced(const std::string& keep) {
  if (podman_ == nullptr) return 0;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ImageRecord>> all = store_.ListImages();
  if (!all.ok()) return 0;
  std::set<std::string> named = {keep};
  for (const ImageRecord& i : *all) named.insert(i.reference);
  absl::StatusOr<std::string> listed = Engine(
      {podman_->options().podman, "images", "--noheading", "--format", "{{.Repository}}:{{.Tag}}"});
  if (!listed.ok()) return 0;
  // Only this weftd's: another weftd on the host names its own under another installation.
  const std::string ours = absl::StrCat(kPrefix, Component("w-", installation_), "/");
  int removed = 0;
  for (absl::string_view line : absl::StrSplit(*listed, '\n', absl::SkipWhitespace())) {
    const std::string ref(absl::StripAsciiWhitespace(line));
    if (!absl::StartsWith(ref, ours) || named.count(ref) > 0) continue;
    removed += Engine({podman_->options().podman, "rmi", ref}).ok();
  }
  return removed;
}

}  // namespace weft
