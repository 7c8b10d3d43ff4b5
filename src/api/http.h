// The REST API's HTTP plumbing (cpp-httplib + nlohmann::json): JSON answers, the error body
// {"error": {"code", "message"[, "details"]}}, Status -> HTTP code, and a router that puts every
// route behind authentication and answers unlisted methods with 405.
#pragma once

#include <httplib.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/rate_limit.h"
#include "control/job_queries.h"
#include "control/tenancy.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"

namespace weft::api {

using Handler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&)>;

// Who may call a route.
enum class Access {
  kPublic,  // no token (health checks)
  kAnyone,  // any valid token, admin or tenant
  kAdmin,   // the admin token only
};

void SendJson(httplib::Response& res, int status, const nlohmann::json& body);
// 400 bad input, 401, 403, 404, 405, 409 wrong state, 413, 429, 500, 503; `details` lists
// problems.
void SendError(httplib::Response& res, int status, const std::string& message,
               nlohmann::json details = nullptr);
// Maps a Status from the controller or store to its HTTP error: NotFound 404, InvalidArgument
// 400, FailedPrecondition and AlreadyExists 409, Unavailable 503, Unauthenticated 401,
// PermissionDenied 403, ResourceExhausted (a full disk or store) 507, anything else 500.
void SendStatus(httplib::Response& res, const absl::Status& s);
// A submission refused: 400 listing each field's problem when there are `errors` (the manifest
// is invalid), else `s` as SendStatus maps it.
void SendRefusal(httplib::Response& res, const absl::Status& s,
                 const std::vector<FieldError>& errors);

// Answers 200 with the file at `path` (a model, a log) streamed in reads of kFileChunkBytes, never
// held whole in memory: its bytes as of now (Content-Length is its size now; a log that grows
// meanwhile is served up to here). The file is opened now, so one replaced by a rename meanwhile is
// served as it was. A symbolic link anywhere along `path` is refused (OpenNoSymlinks: a job's
// learner writes in its job's directory), and so is what is not a regular file. NotFound if the
// file does not exist, Internal for other open errors; the response is untouched then.
inline constexpr size_t kFileChunkBytes = 64 * 1024;
absl::Status SendFile(httplib::Response& res, const std::string& path,
                      const std::string& content_type);

// Up to kFileChunkBytes of the file at `path` from byte `offset`, without following a symlink
// anywhere along it; empty at its end or when it cannot be opened or read.
std::string ReadFileChunk(const std::string& path, int64_t offset);

// The {name} the route's pattern captured, for `what` ("artifact", "data set"), checked by
// CheckArtifactName's rule (job/job_spec.h); nullopt after answering 400 "invalid <what> name"
// with details [{field: name, problem}] when it breaks the rule.
std::optional<std::string> NameInPath(const httplib::Request& req, httplib::Response& res,
                                      const std::string& what);

// 404 "no job '<id>'": for a job that does not exist and for another tenant's alike.
void SendNoSuchJob(httplib::Response& res, const std::string& id);

// The job if it exists and the caller may see it (its tenant, or the admin); otherwise answers
// 404 exactly as for a missing job, so no tenant learns that another's job exists.
std::optional<JobRecord> FindJob(const JobQueries& jobs, const std::string& id,
                                 const Caller& caller, httplib::Response& res);

// A POST handler that reads the request body itself, in pieces as they arrive (an upload), so a
// large body is never held whole in memory. It must call `read` exactly once, also when it refuses
// the request, so the connection stays in step.
using UploadHandler = std::function<void(const httplib::Request&, httplib::Response&, const Caller&,
                                         const httplib::ContentReader& read)>;

class Router {
 public:
  // `limiter` (may be null: no limits) is asked once per authenticated tenant request.
  // `tenancy` authenticates each request's token.
  Router(httplib::Server& server, const Tenancy& tenancy, RateLimiter* limiter = nullptr)
      : server_(server), tenancy_(tenancy), limiter_(limiter) {}
  // Registers `pattern` for the given methods behind `access`, and answers every other method
  // with 405. A missing, invalid or revoked token gets 401; a tenant on an admin route 403; a
  // tenant over its request rate 429 with Retry-After (seconds). The admin is not rate-limited.
  void Route(const std::string& pattern, std::map<std::string, Handler> methods,
             Access access = Access::kAnyone);
  // As Route, with POST served by `upload`.
  void Route(const std::string& pattern, std::map<std::string, Handler> methods, Access access,
             UploadHandler upload);

 private:
  httplib::Server& server_;
  const Tenancy& tenancy_;
  RateLimiter* limiter_;
};

// What a request body may be, checked before a byte of it is read. For
// Server::set_pre_routing_handler, with the server's payload limit at least `max_upload_bytes`.
//  - Neither Content-Length nor Transfer-Encoding: an empty body, as HTTP/1.1 defines it (RFC 9112
//    section 6.3), so `curl -X POST .../halt` is answered at once instead of after the read
//    timeout.
//  - A POST to `upload_path` may send up to `max_upload_bytes`, with a length or chunked.
//  - Any other request at most `max_request_bytes`, with a Content-Length: over it 413, chunked
//  411.
// A refused request is answered with Connection: close (its body is never read).
struct BodyLimits {
  size_t max_request_bytes = 0;
  size_t max_upload_bytes = 0;
  std::string upload_path;
  httplib::Server::HandlerResponse operator()(const httplib::Request& req,
                                              httplib::Response& res) const;
};

}  // namespace weft::api
