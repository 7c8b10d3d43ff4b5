// The SQLite store: the files tenants upload (artifacts), by tenant and name — the files
// themselves live on disk under their SHA-256 (control/artifacts.h); here is only what names
// them — the data sets the admin registers, and the container images jobs run on (the engine
// keeps the images; here is what names them).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sqlite_query.h"
#include "store/sqlite_store.h"

namespace weft {

namespace {

constexpr char kSelectArtifacts[] =
    "SELECT tenant, name, sha256, bytes, created_ms FROM artifacts WHERE tenant=?1";

ArtifactRecord ReadArtifact(sqlite::Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Int(3), s.Int(4)};
}

std::string NoArtifact(const std::string& name) { return absl::StrCat("no artifact '", name, "'"); }

constexpr char kSelectDatasets[] = "SELECT name, path, format, tenants, created_ms FROM datasets";

DatasetRecord ReadDataset(sqlite::Stmt& s) {
  DatasetRecord d{s.Text(0), s.Text(1), s.Text(2), false, {}, s.Int(4)};
  store_columns::ParseTenantsColumn(s.Text(3), &d);
  return d;
}

std::string NoDataset(const std::string& name) { return absl::StrCat("no data set '", name, "'"); }

constexpr char kSelectImages[] =
    "SELECT tenant, name, reference, digest, format, bytes, tenants, created_ms FROM images";

ImageRecord ReadImage(sqlite::Stmt& s) {
  ImageRecord i{s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4),
                s.Int(5),  false,     {},        s.Int(7)};
  store_columns::ParseTenantsColumn(s.Text(6), &i);
  return i;
}

std::string NoImage(const std::string& name) { return absl::StrCat("no image '", name, "'"); }

}  // namespace

absl::Status SqliteStore::PutArtifact(const ArtifactRecord& a) {
  absl::MutexLock lock(&mu_);
  return sqlite::Execute(*stmts_, "put artifact",
                         "INSERT OR REPLACE INTO artifacts (tenant, name, sha256, bytes, "
                         "created_ms) VALUES (?1,?2,?3,?4,?5)",
                         a.tenant, a.name, a.sha256, a.bytes, a.created_ms)
      .status();
}

absl::StatusOr<ArtifactRecord> SqliteStore::GetArtifact(const std::string& tenant,
                                                        const std::string& name) {
  absl::MutexLock lock(&mu_);
  return sqlite::QueryOne<ArtifactRecord>(*stmts_, "get artifact", NoArtifact(name),
                                          absl::StrCat(kSelectArtifacts, " AND name=?2"),
                                          ReadArtifact, tenant, name);
}

absl::StatusOr<std::vector<ArtifactRecord>> SqliteStore::ListArtifacts(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<ArtifactRecord>(*stmts_, "list artifacts",
                                       absl::StrCat(kSelectArtifacts, " ORDER BY name"),
                                       ReadArtifact, tenant);
}

absl::StatusOr<int64_t> SqliteStore::DeleteArtifact(const std::string& tenant,
                                                    const std::string& name) {
  absl::MutexLock lock(&mu_);
  sqlite::Transaction tx(db_);
  RETURN_IF_ERROR(tx.Begun());
  ASSIGN_OR_RETURN(ArtifactRecord a,
                   sqlite::QueryOne<ArtifactRecord>(*stmts_, "get artifact", NoArtifact(name),
                                                    absl::StrCat(kSelectArtifacts, " AND name=?2"),
                                                    ReadArtifact, tenant, name));
  RETURN_IF_ERROR(sqlite::Execute(*stmts_, "delete artifact",
                                  "DELETE FROM artifacts WHERE tenant=?1 AND name=?2", tenant, name)
                      .status());
  ASSIGN_OR_RETURN(std::vector<int64_t> left,
                   sqlite::Query<int64_t>(
                       *stmts_, "count artifacts",
                       "SELECT COUNT(*) FROM artifacts WHERE tenant=?1 AND sha256=?2",
                       [](sqlite::Stmt& s) { return s.Int(0); }, tenant, a.sha256));
  RETURN_IF_ERROR(tx.Commit());
  return left.empty() ? 0 : left[0];
}

absl::Status SqliteStore::PutDataset(const DatasetRecord& d) {
  absl::MutexLock lock(&mu_);
  return sqlite::Execute(*stmts_, "put data set",
                         "INSERT OR REPLACE INTO datasets (name, path, format, tenants, "
                         "created_ms) VALUES (?1,?2,?3,?4,?5)",
                         d.name, d.path, d.format, store_columns::TenantsColumn(d), d.created_ms)
      .status();
}

absl::StatusOr<DatasetRecord> SqliteStore::GetDataset(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return sqlite::QueryOne<DatasetRecord>(*stmts_, "get data set", NoDataset(name),
                                         absl::StrCat(kSelectDatasets, " WHERE name=?1"),
                                         ReadDataset, name);
}

absl::StatusOr<std::vector<DatasetRecord>> SqliteStore::ListDatasets() {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<DatasetRecord>(*stmts_, "list data sets",
                                      absl::StrCat(kSelectDatasets, " ORDER BY name"), ReadDataset);
}

absl::Status SqliteStore::DeleteDataset(const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int n, sqlite::Execute(*stmts_, "delete data set",
                                          "DELETE FROM datasets WHERE name=?1", name));
  if (n == 0) return absl::NotFoundError(NoDataset(name));
  return absl::OkStatus();
}

absl::Status SqliteStore::PutImage(const ImageRecord& i) {
  absl::MutexLock lock(&mu_);
  return sqlite::Execute(*stmts_, "put image",
                         "INSERT OR REPLACE INTO images (tenant, name, reference, digest, format, "
                         "bytes, tenants, created_ms) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
                         i.tenant, i.name, i.reference, i.digest, i.format, i.bytes,
                         store_columns::TenantsColumn(i), i.created_ms)
      .status();
}

absl::StatusOr<ImageRecord> SqliteStore::GetImage(const std::string& owner,
                                                  const std::string& name) {
  absl::MutexLock lock(&mu_);
  return sqlite::QueryOne<ImageRecord>(*stmts_, "get image", NoImage(name),
                                       absl::StrCat(kSelectImages, " WHERE tenant=?1 AND name=?2"),
                                       ReadImage, owner, name);
}

absl::StatusOr<std::vector<ImageRecord>> SqliteStore::ListImages() {
  absl::MutexLock lock(&mu_);
  return sqlite::Query<ImageRecord>(
      *stmts_, "list images", absl::StrCat(kSelectImages, " ORDER BY tenant, name"), ReadImage);
}

absl::Status SqliteStore::DeleteImage(const std::string& owner, const std::string& name) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int n,
                   sqlite::Execute(*stmts_, "delete image",
                                   "DELETE FROM images WHERE tenant=?1 AND name=?2", owner, name));
  if (n == 0) return absl::NotFoundError(NoImage(name));
  return absl::OkStatus();
}

absl::Status SqliteStore::ForgetTenantInDatasetsLocked(const std::string& tenant) {
  ASSIGN_OR_RETURN(
      std::vector<DatasetRecord> all,
      sqlite::Query<DatasetRecord>(*stmts_, "list data sets", kSelectDatasets, ReadDataset));
  for (DatasetRecord& d : all) {
    auto it = std::find(d.tenants.begin(), d.tenants.end(), tenant);
    if (it == d.tenants.end()) continue;
    d.tenants.erase(it);
    RETURN_IF_ERROR(sqlite::Execute(*stmts_, "update data set",
                                    "UPDATE datasets SET tenants=?2 WHERE name=?1", d.name,
                                    store_columns::TenantsColumn(d))
                        .status());
  }
  // The tenant's own images go with it; the admin's it was granted no longer name it.
  RETURN_IF_ERROR(
      sqlite::Execute(*stmts_, "delete images", "DELETE FROM images WHERE tenant=?1", tenant)
          .status());
  ASSIGN_OR_RETURN(
      std::vector<ImageRecord> images,
      sqlite::Query<ImageRecord>(*stmts_, "list images",
                                 absl::StrCat(kSelectImages, " WHERE tenant=''"), ReadImage));
  for (ImageRecord& i : images) {
    auto it = std::find(i.tenants.begin(), i.tenants.end(), tenant);
    if (it == i.tenants.end()) continue;
    i.tenants.erase(it);
    RETURN_IF_ERROR(sqlite::Execute(*stmts_, "update image",
                                    "UPDATE images SET tenants=?2 WHERE tenant='' AND name=?1",
                                    i.name, store_columns::TenantsColumn(i))
                        .status());
  }
  return absl::OkStatus();
}

}  // namespace weft
