// The store: the files tenants upload (artifacts), by tenant and name — the files themselves
// live on disk under their SHA-256 (control/artifacts.h); here is only what names them — the
// data sets the admin registers, and the container images jobs run on (the engine keeps the
// images; here is what names them).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "store/job_columns.h"
#include "store/sql_store.h"

namespace weft::sql_store {
namespace {

constexpr char kSelectArtifacts[] =
    "SELECT tenant, name, sha256, bytes, created_ms FROM artifacts WHERE tenant=$1";

ArtifactRecord ReadArtifact(const sql::Row& row) {
  return {row.Text(0), row.Text(1), row.Text(2), row.Int(3), row.Int(4)};
}

std::string NoArtifact(const std::string& name) { return absl::StrCat("no artifact '", name, "'"); }

constexpr char kSelectDatasets[] = "SELECT name, path, format, tenants, created_ms FROM datasets";

DatasetRecord ReadDataset(const sql::Row& row) {
  DatasetRecord d{row.Text(0), row.Text(1), row.Text(2), false, {}, row.Int(4)};
  store_columns::ParseTenantsColumn(row.Text(3), &d);
  return d;
}

std::string NoDataset(const std::string& name) { return absl::StrCat("no data set '", name, "'"); }

constexpr char kSelectImages[] =
    "SELECT tenant, name, reference, digest, format, bytes, tenants, created_ms FROM images";

ImageRecord ReadImage(const sql::Row& row) {
  ImageRecord i{row.Text(0), row.Text(1), row.Text(2), row.Text(3), row.Text(4),
                row.Int(5),  false,       {},          row.Int(7)};
  store_columns::ParseTenantsColumn(row.Text(6), &i);
  return i;
}

std::string NoImage(const std::string& name) { return absl::StrCat("no image '", name, "'"); }

// Runs one write statement in its own transaction; NotFound(`not_found`) if it changed no row
// (unless `not_found` is empty).
template <typename... Args>
absl::Status WriteOne(sql::Database& db, const std::string& what, const std::string& not_found,
                      const std::string& sql, const Args&... args) {
  return db.Run(what, sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t n, tx.Execute(what, sql, args...));
    if (n == 0 && !not_found.empty()) return absl::NotFoundError(not_found);
    return absl::OkStatus();
  });
}

// The rows of one query in a read.
template <typename T, typename Read, typename... Args>
absl::StatusOr<std::vector<T>> ReadAll(sql::Database& db, const std::string& what,
                                       const std::string& sql, Read read, const Args&... args) {
  return db.Run(what, sql::Mode::kRead,
                [&](sql::Tx& tx) { return tx.Query<T>(what, sql, read, args...); });
}

// The first row of one query in a read; NotFound(`not_found`) if none.
template <typename T, typename Read, typename... Args>
absl::StatusOr<T> ReadOne(sql::Database& db, const std::string& what, const std::string& not_found,
                          const std::string& sql, Read read, const Args&... args) {
  return db.Run(what, sql::Mode::kRead,
                [&](sql::Tx& tx) { return tx.QueryOne<T>(what, not_found, sql, read, args...); });
}

// Drops `tenant` from the grant of each row `select` reads, writing each changed one back with
// `update` ($1 the row's name, $2 its new tenants column).
template <typename Grant, typename Read>
absl::Status DropFromGrants(sql::Tx& tx, const std::string& tenant, const std::string& select,
                            Read read, const std::string& update) {
  ASSIGN_OR_RETURN(std::vector<Grant> all, tx.Query<Grant>("read grants", select, read));
  for (Grant& g : all) {
    auto it = std::find(g.tenants.begin(), g.tenants.end(), tenant);
    if (it == g.tenants.end()) continue;
    g.tenants.erase(it);
    RETURN_IF_ERROR(
        tx.Execute("update grant", update, g.name, store_columns::TenantsColumn(g)).status());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Artifacts::PutArtifact(const ArtifactRecord& a) {
  return WriteOne(*db_, "put artifact", "",
                  "INSERT INTO artifacts (tenant, name, sha256, bytes, created_ms) VALUES "
                  "($1,$2,$3,$4,$5) ON CONFLICT (tenant, name) DO UPDATE SET "
                  "sha256=EXCLUDED.sha256, bytes=EXCLUDED.bytes, created_ms=EXCLUDED.created_ms",
                  a.tenant, a.name, a.sha256, a.bytes, a.created_ms);
}

absl::StatusOr<ArtifactRecord> Artifacts::GetArtifact(const std::string& tenant,
                                                      const std::string& name) {
  return ReadOne<ArtifactRecord>(*db_, "get artifact", NoArtifact(name),
                                 absl::StrCat(kSelectArtifacts, " AND name=$2"), ReadArtifact,
                                 tenant, name);
}

absl::StatusOr<std::vector<ArtifactRecord>> Artifacts::ListArtifacts(const std::string& tenant) {
  return ReadAll<ArtifactRecord>(*db_, "list artifacts",
                                 absl::StrCat(kSelectArtifacts, " ORDER BY name"), ReadArtifact,
                                 tenant);
}

absl::StatusOr<int64_t> Artifacts::DeleteArtifact(const std::string& tenant,
                                                  const std::string& name) {
  return db_->Run(
      "delete artifact", sql::Mode::kWrite, [&](sql::Tx& tx) -> absl::StatusOr<int64_t> {
        ASSIGN_OR_RETURN(std::string sha256,
                         tx.QueryOne<std::string>(
                             "delete artifact", NoArtifact(name),
                             "DELETE FROM artifacts WHERE tenant=$1 AND name=$2 RETURNING sha256",
                             [](const sql::Row& row) { return row.Text(0); }, tenant, name));
        return tx.Count("count artifacts",
                        "SELECT COUNT(*) FROM artifacts WHERE tenant=$1 AND sha256=$2", tenant,
                        sha256);
      });
}

absl::Status Artifacts::PutDataset(const DatasetRecord& d) {
  return WriteOne(*db_, "put data set", "",
                  "INSERT INTO datasets (name, path, format, tenants, created_ms) VALUES "
                  "($1,$2,$3,$4,$5) ON CONFLICT (name) DO UPDATE SET path=EXCLUDED.path, "
                  "format=EXCLUDED.format, tenants=EXCLUDED.tenants, "
                  "created_ms=EXCLUDED.created_ms",
                  d.name, d.path, d.format, store_columns::TenantsColumn(d), d.created_ms);
}

absl::StatusOr<DatasetRecord> Artifacts::GetDataset(const std::string& name) {
  return ReadOne<DatasetRecord>(*db_, "get data set", NoDataset(name),
                                absl::StrCat(kSelectDatasets, " WHERE name=$1"), ReadDataset, name);
}

absl::StatusOr<std::vector<DatasetRecord>> Artifacts::ListDatasets() {
  return ReadAll<DatasetRecord>(*db_, "list data sets",
                                absl::StrCat(kSelectDatasets, " ORDER BY name"), ReadDataset);
}

absl::Status Artifacts::DeleteDataset(const std::string& name) {
  return WriteOne(*db_, "delete data set", NoDataset(name), "DELETE FROM datasets WHERE name=$1",
                  name);
}

absl::Status Artifacts::PutImage(const ImageRecord& i) {
  return WriteOne(*db_, "put image", "",
                  "INSERT INTO images (tenant, name, reference, digest, format, bytes, tenants, "
                  "created_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (tenant, name) DO "
                  "UPDATE SET reference=EXCLUDED.reference, digest=EXCLUDED.digest, "
                  "format=EXCLUDED.format, bytes=EXCLUDED.bytes, tenants=EXCLUDED.tenants, "
                  "created_ms=EXCLUDED.created_ms",
                  i.tenant, i.name, i.reference, i.digest, i.format, i.bytes,
                  store_columns::TenantsColumn(i), i.created_ms);
}

absl::StatusOr<ImageRecord> Artifacts::GetImage(const std::string& owner, const std::string& name) {
  return ReadOne<ImageRecord>(*db_, "get image", NoImage(name),
                              absl::StrCat(kSelectImages, " WHERE tenant=$1 AND name=$2"),
                              ReadImage, owner, name);
}

absl::StatusOr<std::vector<ImageRecord>> Artifacts::ListImages() {
  return ReadAll<ImageRecord>(*db_, "list images",
                              absl::StrCat(kSelectImages, " ORDER BY tenant, name"), ReadImage);
}

absl::Status Artifacts::DeleteImage(const std::string& owner, const std::string& name) {
  return WriteOne(*db_, "delete image", NoImage(name),
                  "DELETE FROM images WHERE tenant=$1 AND name=$2", owner, name);
}

absl::Status ForgetTenantInGrantsIn(sql::Tx& tx, const std::string& tenant) {
  const std::string& for_update = tx.dialect().for_update;
  RETURN_IF_ERROR(
      DropFromGrants<DatasetRecord>(tx, tenant, absl::StrCat(kSelectDatasets, for_update),
                                    ReadDataset, "UPDATE datasets SET tenants=$2 WHERE name=$1"));
  // The tenant's own images go with it; the admin's it was granted no longer name it.
  RETURN_IF_ERROR(
      tx.Execute("delete images", "DELETE FROM images WHERE tenant=$1", tenant).status());
  return DropFromGrants<ImageRecord>(
      tx, tenant, absl::StrCat(kSelectImages, " WHERE tenant=''", for_update), ReadImage,
      "UPDATE images SET tenants=$2 WHERE tenant='' AND name=$1");
}

}  // namespace weft::sql_store
