#include "api/http.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/metrics.h"
#include "job/job_spec.h"

namespace weft::api {

void SendJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  // Text that is not UTF-8 never makes an answer fail: it is shown with U+FFFD instead.
  res.set_content(body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

void SendError(httplib::Response& res, int status, const std::string& message,
               nlohmann::json details) {
  static const std::map<int, std::string> kCodes = {
      {400, "bad_request"},        {401, "unauthorized"},
      {403, "forbidden"},          {404, "not_found"},
      {405, "method_not_allowed"}, {409, "conflict"},
      {413, "payload_too_large"},  {429, "too_many_requests"},
      {500, "internal"},           {507, "insufficient_storage"},
      {503, "unavailable"}};
  nlohmann::json err = {{"code", kCodes.count(status) ? kCodes.at(status) : "error"},
                        {"message", message}};
  if (!details.is_null()) err["details"] = details;
  SendJson(res, status, {{"error", err}});
}

std::optional<std::string> NameInPath(const httplib::Request& req, httplib::Response& res,
                                      const std::string& what) {
  const std::string name = req.matches[1];
  if (absl::Status s = CheckArtifactName(name); !s.ok()) {
    SendError(res, 400, absl::StrCat("invalid ", what, " name"),
              nlohmann::json::array({{{"field", "name"}, {"problem", std::string(s.message())}}}));
    return std::nullopt;
  }
  return name;
}

void SendRefusal(httplib::Response& res, const absl::Status& s,
                 const std::vector<FieldError>& errors) {
  if (errors.empty()) return SendStatus(res, s);
  nlohmann::json details = nlohmann::json::array();
  for (const FieldError& e : errors)
    details.push_back({{"field", e.field}, {"problem", e.problem}});
  SendError(res, 400, std::string(s.message()), details);
}

void SendStatus(httplib::Response& res, const absl::Status& s) {
  int code = 500;
  if (absl::IsNotFound(s)) code = 404;
  if (absl::IsInvalidArgument(s)) code = 400;
  if (absl::IsFailedPrecondition(s) || absl::IsAlreadyExists(s)) code = 409;
  if (absl::IsUnavailable(s)) code = 503;
  if (absl::IsUnauthenticated(s)) code = 401;
  if (absl::IsPermissionDenied(s)) code = 403;
  if (absl::IsResourceExhausted(s)) code = 507;
  SendError(res, code, std::string(s.message()));
}

absl::Status SendFile(httplib::Response& res, const std::string& path,
                      const std::string& content_type) {
  // What a job's learner wrote may have a link in its place, or in its directory's place.
  const int raw = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (raw < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(err)));
  }
  // Closed when the server drops the provider, however the transfer ends.
  auto fd = std::shared_ptr<int>(new int(raw), [](int* f) {
    ::close(*f);
    delete f;
  });
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InternalError(absl::StrCat(path, " is not a regular file"));
  }
  res.status = 200;
  res.set_content_provider(static_cast<size_t>(st.st_size), content_type,
                           [fd](size_t offset, size_t length, httplib::DataSink& sink) {
                             std::string buffer(std::min(length, kFileChunkBytes), '\0');
                             const ssize_t n = ::pread(*fd, buffer.data(), buffer.size(),
                                                       static_cast<off_t>(offset));
                             if (n <= 0)
                               return false;  // shrank or failed: the connection is closed short
                             return sink.write(buffer.data(), static_cast<size_t>(n));
                           });
  return absl::OkStatus();
}

std::string ReadFileChunk(const std::string& path, int64_t offset) {
  const int fd = OpenNoSymlinks(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return "";
  std::string chunk(kFileChunkBytes, '\0');
  const ssize_t n = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(offset));
  ::close(fd);
  chunk.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return chunk;
}

void SendNoSuchJob(httplib::Response& res, const std::string& id) {
  SendError(res, 404, absl::StrCat("no job '", id, "'; `weft list` shows your jobs"));
}

std::optional<JobRecord> FindJob(const JobQueries& jobs, const std::string& id,
                                 const Caller& caller, httplib::Response& res) {
  auto job = jobs.Find(caller, id);
  if (job.ok()) return *job;
  if (absl::IsNotFound(job.status())) {
    SendNoSuchJob(res, id);
  } else {
    SendStatus(res, job.status());
  }
  return std::nullopt;
}

namespace {

using RawHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Behind the route's authentication like the allowed methods, so a caller without a valid token
// learns nothing of which methods a route has.
Handler NotAllowed(const std::string& method, const std::string& allow) {
  return [method, allow](const httplib::Request& req, httplib::Response& res, const Caller&) {
    res.set_header("Allow", allow);
    SendError(res, 405,
              absl::StrCat(method, " is not allowed on ", req.path, "; allowed: ", allow));
  };
}

// 429 with Retry-After when the tenant's bucket is empty; false when the request may go on.
bool OverRate(RateLimiter* limiter, const Caller& caller, httplib::Response& res) {
  if (limiter == nullptr || caller.admin) return false;
  const int64_t wait_ms = limiter->Acquire(caller.tenant);
  if (wait_ms == 0) return false;
  const int64_t seconds = (wait_ms + 999) / 1000;
  res.set_header("Retry-After", std::to_string(seconds));
  SendError(res, 429,
            absl::StrCat("tenant '", caller.tenant, "' is over its request rate; retry in ",
                         seconds, " s (weftd --tenant-requests-per-second)"));
  return true;
}

// The caller, or nothing when the request is answered already (401, 403, 429).
std::optional<Caller> Admit(const httplib::Request& req, httplib::Response& res, Access access,
                            const Tenancy* tenancy, RateLimiter* limiter) {
  if (access == Access::kPublic) return Caller{};
  auto c = tenancy->Authenticate(req.get_header_value("Authorization"));
  if (!c.ok()) {
    if (absl::IsUnauthenticated(c.status())) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"weft\"");
    }
    SendStatus(res, c.status());
    return std::nullopt;
  }
  if (access == Access::kAdmin && !c->admin) {
    SendError(res, 403, "this route needs the admin token");
    return std::nullopt;
  }
  if (OverRate(limiter, *c, res)) return std::nullopt;
  return *c;
}

RawHandler Authenticated(Handler h, Access access, const Tenancy* tenancy, RateLimiter* limiter) {
  return [h, access, tenancy, limiter](const httplib::Request& req, httplib::Response& res) {
    if (std::optional<Caller> caller = Admit(req, res, access, tenancy, limiter)) {
      h(req, res, *caller);
    }
  };
}

}  // namespace

namespace {

constexpr char kRequestSeconds[] = "weft_http_request_duration_seconds";

// A route's regex as people read it: "/v1/jobs/([^/]+)/logs" -> "/v1/jobs/{id}/logs".
std::string RouteLabel(const std::string& pattern) {
  std::string out;
  int depth = 0;
  for (char c : pattern) {
    if (c == '(' && depth++ == 0) out += "{id}";
    if (depth == 0) out += c;
    if (c == ')') --depth;
  }
  return out;
}

// `h`, timed into weft_http_request_duration_seconds{method, route, code}.
RawHandler Timed(const std::string& method, const std::string& route, RawHandler h) {
  MetricsRegistry::Global().DeclareHistogram(
      kRequestSeconds, "REST requests by method, route and status code, in seconds",
      SecondsBuckets());
  return [method, route, h = std::move(h)](const httplib::Request& req, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    h(req, res);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MetricsRegistry::Global().Observe(
        kRequestSeconds, {{"method", method}, {"route", route}, {"code", absl::StrCat(res.status)}},
        s);
  };
}

}  // namespace

void Router::Route(const std::string& pattern, std::map<std::string, Handler> methods,
                   Access access) {
  std::set<std::string> allowed;
  for (const auto& [m, h] : methods) allowed.insert(m);
  const std::string allow = absl::StrJoin(allowed, ", ");
  const std::string route = RouteLabel(pattern);
  auto pick = [&](const std::string& method) -> RawHandler {
    auto it = methods.find(method);
    return Timed(method, route,
                 Authenticated(it == methods.end() ? NotAllowed(method, allow) : it->second, access,
                               &tenancy_, limiter_));
  };
  server_.Get(pattern, pick("GET"));
  server_.Post(pattern, pick("POST"));
  server_.Put(pattern, pick("PUT"));
  server_.Patch(pattern, pick("PATCH"));
  server_.Delete(pattern, pick("DELETE"));
}

void Router::Route(const std::string& pattern, std::map<std::string, Handler> methods,
                   Access access, UploadHandler upload) {
  const Tenancy* tenancy = &tenancy_;
  RateLimiter* limiter = limiter_;
  // Served before the plain POST handler Route registers (httplib tries readers first).
  server_.Post(pattern, [upload, access, tenancy, limiter](const httplib::Request& req,
                                                           httplib::Response& res,
                                                           const httplib::ContentReader& read) {
    std::optional<Caller> caller = Admit(req, res, access, tenancy, limiter);
    if (!caller) {
      read([](const char*, size_t) { return true; });  // the body is dropped, unread
      return;
    }
    upload(req, res, *caller, read);
  });
  methods.emplace("POST", [](const httplib::Request&, httplib::Response& res, const Caller&) {
    SendError(res, 500, "the upload handler did not answer");
  });
  Route(pattern, std::move(methods), access);
}

httplib::Server::HandlerResponse BodyLimits::operator()(const httplib::Request& req,
                                                        httplib::Response& res) const {
  using Result = httplib::Server::HandlerResponse;
  const bool upload = req.method == "POST" && req.path == upload_path;
  const std::string length = req.get_header_value("Content-Length");
  auto refuse = [&res](int status, const std::string& message) {
    SendError(res, status, message);
    res.set_header("Connection", "close");
    return Result::Handled;
  };
  if (req.has_header("Transfer-Encoding")) {
    if (upload) return Result::Unhandled;
    return refuse(411, "send the request body with a Content-Length, not chunked");
  }
  if (!req.has_header("Content-Length")) {
    // cpp-httplib 0.11 otherwise reads a POST, PUT, PATCH or DELETE without a length until the
    // connection closes. The Request it hands the pre-routing handler is its own non-const
    // object, so adding the header is well defined.
    const_cast<httplib::Request&>(req).headers.emplace("Content-Length", "0");
    return Result::Unhandled;
  }
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(length, &bytes)) {
    return refuse(400, "Content-Length must be a number of bytes");
  }
  if (upload && bytes > max_upload_bytes) {
    return refuse(413, absl::StrCat("the upload is ", bytes, " bytes, over the ", max_upload_bytes,
                                    " bytes weftd accepts (weftd --max-artifact-mb)"));
  }
  if (!upload && bytes > max_request_bytes) {
    return refuse(
        413, absl::StrCat("the request body is ", bytes, " bytes, over the ", max_request_bytes,
                          " bytes weftd accepts (weftd --max-request-bytes)"));
  }
  return Result::Unhandled;
}

}  // namespace weft::api
