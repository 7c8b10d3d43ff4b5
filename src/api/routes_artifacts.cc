// /v1/artifacts: the files a tenant uploads for its jobs (control/artifacts.h). Each tenant sees
// only its own; another tenant's name is 404 as a missing one is. The admin token owns no
// artifacts.
#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/routes.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/text.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;

nlohmann::json ArtifactJson(const ArtifactRecord& a) {
  return {{"name", a.name},
          {"sha256", a.sha256},
          {"bytes", a.bytes},
          {"created", FormatTimeMs(a.created_ms)}};
}

// Answers 403 for the admin token, which owns no artifacts.
bool RefuseAdmin(const Caller& caller, Response& res) {
  if (!caller.admin) return false;
  SendError(res, 403,
            "artifacts belong to tenants; the admin token has none (use a tenant's token)");
  return true;
}

// Maps the artifact service's errors: over a limit is 413, the rest as SendStatus.
void SendArtifactError(Response& res, const absl::Status& s) {
  if (absl::IsOutOfRange(s)) return SendError(res, 413, std::string(s.message()));
  SendStatus(res, s);
}

// How an upload's body went.
struct BodyRead {
  bool complete = false;    // read to its end
  bool over_quota = false;  // past `room`: the rest was read and dropped
  bool timed_out = false;   // not all there within the deadline: reading stopped
};

// Streams the body into `u` while it holds at most `room` bytes. Past a limit the rest of the
// body is read and dropped (at most the upload limit), so the connection stays in step; past
// `timeout_s` seconds reading stops and the connection must close.
BodyRead ReadBody(const httplib::ContentReader& read, Artifacts::Upload& u, int64_t room,
                  int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  BodyRead r;
  r.complete = read([&](const char* data, size_t n) {
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      return false;
    }
    r.over_quota = r.over_quota || u.bytes() + static_cast<int64_t>(n) > room;
    if (!r.over_quota) u.Append(std::string_view(data, n)).IgnoreError();
    return true;
  });
  return r;
}

void Upload(const Services& s, const Request& req, Response& res, const Caller& caller,
            const httplib::ContentReader& read) {
  auto drop = [&read] { read([](const char*, size_t) { return true; }); };
  if (RefuseAdmin(caller, res)) return drop();
  const std::string name = req.get_param_value("name");
  if (absl::Status st = CheckArtifactName(name); !st.ok()) {
    drop();
    return SendError(
        res, 400, "invalid artifact name",
        nlohmann::json::array({{{"field", "name"},
                                {"problem", absl::StrCat(std::string(st.message()),
                                                         " (the query parameter ?name=)")}}}));
  }
  int64_t declared = -1;
  if (req.has_header("Content-Length") &&
      !absl::SimpleAtoi(req.get_header_value("Content-Length"), &declared)) {
    declared = -1;
  }
  // Each upload holds one of the server's threads while its body arrives.
  std::shared_ptr<StreamLimiter::Lease> lease;
  if (s.uploads != nullptr && !(lease = s.uploads->Acquire(caller.tenant))) {
    drop();
    return SendError(res, 429,
                     "too many uploads in progress for this tenant or on this server; send it "
                     "once one has finished");
  }
  // The tenant's disk quota (jobs' files and artifacts together) before its own artifact limit,
  // and as the body streams: a chunked body declares no length.
  int64_t room = std::numeric_limits<int64_t>::max();
  if (DiskQuota* disk = s.disk_quota; disk != nullptr) {
    absl::Status st = disk->CheckRoom(caller.tenant, std::max<int64_t>(declared, 0));
    absl::StatusOr<int64_t> left = st.ok() ? disk->RoomBytes(caller.tenant) : st;
    if (!left.ok()) {
      drop();
      return SendStatus(res, left.status());
    }
    room = *left;
  }
  auto upload = s.artifacts->Begin(caller.tenant, name, declared);
  if (!upload.ok()) {
    drop();
    return SendArtifactError(res, upload.status());
  }
  const BodyRead body = ReadBody(read, **upload, room, s.upload_timeout_s);
  if (body.timed_out) {
    spdlog::warn("tenant {}: upload of '{}' stopped: its body did not arrive within {} s",
                 caller.tenant, name, s.upload_timeout_s);
    res.set_header("Connection", "close");
    return SendError(res, 408,
                     absl::StrCat("the upload's body did not arrive within ", s.upload_timeout_s,
                                  " s (weftd --upload-timeout-seconds)"));
  }
  if (body.over_quota) {
    return SendStatus(res, absl::ResourceExhaustedError(
                               absl::StrCat("the upload was stopped at ", FormatMib(room),
                                            ", what was left of "
                                            "tenant '",
                                            caller.tenant,
                                            "''s disk quota; free space with weft "
                                            "delete JOB or weft artifact delete NAME")));
  }
  if (!body.complete) {
    if (res.status == 413) {
      return SendError(res, 413,
                       absl::StrCat("the upload is over the ", s.artifacts->limits().max_bytes,
                                    " bytes weftd accepts (weftd --max-artifact-mb)"));
    }
    return SendError(res, 400, "the upload ended before its body did");
  }
  auto committed = s.artifacts->Commit(std::move(*upload));
  if (!committed.ok()) return SendArtifactError(res, committed.status());
  res.set_header("Location", absl::StrCat("/v1/artifacts/", name));
  SendJson(res, committed->created ? 201 : 200, ArtifactJson(committed->artifact));
}

void List(const Services& s, const Request&, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  auto all = s.artifacts->List(caller.tenant);
  if (!all.ok()) return SendStatus(res, all.status());
  auto used = s.artifacts->BytesUsed(caller.tenant);
  if (!used.ok()) return SendStatus(res, used.status());
  nlohmann::json list = nlohmann::json::array();
  for (const ArtifactRecord& a : *all) list.push_back(ArtifactJson(a));
  SendJson(res, 200,
           {{"artifacts", list},
            {"bytes_used", *used},
            {"bytes_quota", s.artifacts->limits().tenant_bytes},
            {"max_artifact_bytes", s.artifacts->limits().max_bytes}});
}

void Show(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  auto name = NameInPath(req, res, "artifact");
  if (!name) return;
  auto a = s.artifacts->Get(caller.tenant, *name);
  if (!a.ok()) return SendStatus(res, a.status());
  SendJson(res, 200, ArtifactJson(*a));
}

void Content(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  auto name = NameInPath(req, res, "artifact");
  if (!name) return;
  auto a = s.artifacts->Get(caller.tenant, *name);
  if (!a.ok()) return SendStatus(res, a.status());
  if (absl::Status st = SendFile(res, s.artifacts->PathOf(*a), "application/octet-stream");
      !st.ok()) {
    return SendStatus(res, st);
  }
  res.set_header("X-Content-SHA256", a->sha256);
}

void Delete(const Services& s, const Request& req, Response& res, const Caller& caller) {
  if (RefuseAdmin(caller, res)) return;
  auto name = NameInPath(req, res, "artifact");
  if (!name) return;
  if (absl::Status st = s.artifacts->Delete(caller.tenant, *name); !st.ok()) {
    return SendStatus(res, st);
  }
  if (s.disk_quota != nullptr) s.disk_quota->Forget(caller.tenant);
  SendJson(res, 200, {{"name", *name}, {"deleted", true}});
}

}  // namespace

void AddArtifactRoutes(Router& r, const Services& s) {
  r.Route("/v1/artifacts", {{"GET", Bind(s, List)}}, Access::kAnyone,
          [&s](const Request& req, Response& res, const Caller& caller,
               const httplib::ContentReader& read) { Upload(s, req, res, caller, read); });
  r.Route(R"(/v1/artifacts/([^/]+))", {{"GET", Bind(s, Show)}, {"DELETE", Bind(s, Delete)}});
  r.Route(R"(/v1/artifacts/([^/]+)/content)", {{"GET", Bind(s, Content)}});
}

}  // namespace weft::api
