// Server-sent events (the WHATWG `text/event-stream` format): GET /v1/events, everything that
// happens to the caller's jobs (the admin: every job), and GET /v1/jobs/{id}/events, one job from
// a snapshot of it until it settles. Both read the controller's EventHub; `weft follow` and the
// dashboard use them instead of polling.
#include <chrono>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/job_json.h"
#include "api/routes.h"

namespace weft::api {
namespace {

using Request = httplib::Request;
using Response = httplib::Response;
using SteadyTime = std::chrono::steady_clock::time_point;

// How long one call of the content provider waits for an event: how soon a stream notices that
// its client went away.
constexpr absl::Duration kPollWait = absl::Seconds(1);
// A comment line after this much silence keeps proxies and idle timeouts from closing the
// stream.
constexpr auto kKeepAlive = std::chrono::seconds(15);
// The metric points a snapshot carries (as GET /v1/jobs/{id}).
constexpr int64_t kSnapshotMetrics = 200;

// One event in the text/event-stream format, named RUN-SEQ (EventHub::run, the sequence
// number). `data` is one line: JSON is dumped without newlines, and invalid UTF-8 from a
// tenant's strings is replaced rather than thrown on.
std::string SseEvent(const EventHub& hub, int64_t seq, const char* event,
                     const nlohmann::json& data) {
  return absl::StrCat("id: ", hub.run(), "-", seq, "\nevent: ", event, "\ndata: ",
                      data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "\n\n");
}

// Where a stream is, shared by the calls of its content provider.
struct Stream {
  int64_t cursor = 0;     // the newest event sent or skipped
  std::string pending;    // written before anything else (the opening snapshot)
  bool ended = false;     // the job settled or was deleted: close after `pending`
  SteadyTime last_write;  // for keep-alives
  std::shared_ptr<StreamLimiter::Lease> lease;
};

// The cursor a reconnecting client asks to continue from: the Last-Event-ID header that
// EventSource sends (or ?after=ID for clients that cannot set headers), if it names an event of
// this weftd's run (RUN-SEQ, SEQ at most the newest); nullopt otherwise — an id of an earlier
// run included, whose numbers mean nothing now.
std::optional<int64_t> ResumeCursor(const Request& req, const EventHub& hub) {
  std::string text = req.get_header_value("Last-Event-ID");
  if (text.empty()) text = req.get_param_value("after");
  const size_t dash = text.find('-');
  int64_t run = 0, seq = 0;
  if (dash == std::string::npos || !absl::SimpleAtoi(text.substr(0, dash), &run) ||
      run != hub.run() || !absl::SimpleAtoi(text.substr(dash + 1), &seq) || seq < 0 ||
      seq > hub.LastSeq()) {
    return std::nullopt;
  }
  return seq;
}

// Whether the request asked to continue after an event.
bool AsksToResume(const Request& req) {
  return req.has_header("Last-Event-ID") || req.has_param("after");
}

// The job as GET /v1/jobs/{id} shows it, as the opening `job` event of its stream, with the
// cursor it reflects; ended when it is settled already. False after answering an error.
bool SnapshotJob(const Services& s, const std::string& id, Stream& stream, Response* res) {
  auto read = s.controller.SnapshotForEvents(id, kSnapshotMetrics);
  if (!read.ok()) {
    if (res != nullptr) SendStatus(*res, read.status());
    stream.ended = true;
    return false;
  }
  const Store::JobSnapshot& snap = read->first;
  auto spec = s.controller.Spec(snap.job);
  if (!spec.ok()) {
    if (res != nullptr) SendStatus(*res, spec.status());
    stream.ended = true;
    return false;
  }
  stream.cursor = read->second;
  stream.pending +=
      SseEvent(s.controller.events(), stream.cursor, "job",
               JobDetailJson({snap.job, **spec, snap.history, snap.metrics, snap.models,
                              s.controller.view().WaitingFor(id), s.clock.NowMs()}));
  stream.ended = IsSettled(snap.job.state);
  return true;
}

// Sets `res` up to stream: `keep` picks the events; `job` is the one job of a per-job stream
// (empty for GET /v1/events), which ends once it settles or is deleted and re-reads its snapshot
// if it fell behind the hub.
void StartStream(const Services& s, std::shared_ptr<Stream> stream, const std::string& job,
                 std::function<bool(const JobEvent&)> keep, Response& res) {
  const Services* services = &s;
  stream->last_write = std::chrono::steady_clock::now();
  stream->pending = "retry: 2000\n\n" + stream->pending;
  auto provider = [services, stream, job, keep](size_t, httplib::DataSink& sink) {
    if (!sink.is_writable()) return false;
    std::string out = std::move(stream->pending);  // the opening snapshot goes out at once
    stream->pending.clear();
    if (out.empty() && !stream->ended) {
      EventHub::Batch b = services->controller.events().Wait(stream->cursor, kPollWait, keep);
      stream->cursor = b.last;
      if (b.missed && !job.empty()) {
        SnapshotJob(*services, job, *stream, nullptr);
        out = std::move(stream->pending);
        stream->pending.clear();
        b.events.clear();
      } else if (b.missed) {
        out = SseEvent(services->controller.events(), b.last, "reset",
                       {{"reason",
                         "weftd no longer holds some events after the last one "
                         "this stream sent; read the jobs again"}});
      }
      for (const JobEvent& e : b.events) {
        out +=
            SseEvent(services->controller.events(), e.seq, JobEventTypeName(e.type), EventJson(e));
        const bool settled = e.type == JobEventType::kState && IsSettled(e.to);
        if (!job.empty() && (settled || e.type == JobEventType::kDeleted)) {
          stream->ended = true;
          break;
        }
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (out.empty() && now - stream->last_write >= kKeepAlive) out = ": keep-alive\n\n";
    if (!out.empty()) {
      if (!sink.write(out.data(), out.size())) return false;
      stream->last_write = now;
    }
    if (stream->ended) {
      stream->lease.reset();  // the place comes back before the client sees the end
      sink.done();
      return true;
    }
    return sink.is_writable();
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", std::move(provider));
}

void AllEvents(const Services& s, const Request& req, Response& res, const Caller& caller) {
  auto stream = std::make_shared<Stream>();
  if (!AcquireStream(s, caller, res, &stream->lease)) return;
  const EventHub& hub = s.controller.events();
  std::optional<int64_t> resume = ResumeCursor(req, hub);
  stream->cursor = resume.value_or(hub.LastSeq());
  if (!resume && AsksToResume(req)) {
    stream->pending = SseEvent(hub, stream->cursor, "reset",
                               {{"reason",
                                 "weftd does not know the event this stream asked to "
                                 "continue after (it restarted, or the id is not one of its "
                                 "RUN-SEQ ids); read the jobs again"}});
  }
  std::function<bool(const JobEvent&)> keep;
  if (!caller.admin) {
    keep = [tenant = caller.tenant](const JobEvent& e) { return e.tenant == tenant; };
  }
  StartStream(s, std::move(stream), "", std::move(keep), res);
}

void JobEvents(const Services& s, const Request& req, Response& res, const Caller& caller) {
  std::string id = req.matches[1];
  std::optional<JobRecord> job = FindJob(s.jobs, id, caller, res);
  if (!job) return;
  auto stream = std::make_shared<Stream>();
  if (!AcquireStream(s, caller, res, &stream->lease)) return;
  std::optional<int64_t> resume = ResumeCursor(req, s.controller.events());
  if (resume && !IsSettled(job->state)) {
    stream->cursor = *resume;
  } else if (!SnapshotJob(s, id, *stream, &res)) {
    return;
  }
  StartStream(
      s, std::move(stream), id, [id](const JobEvent& e) { return e.job == id; }, res);
}

}  // namespace

bool AcquireStream(const Services& s, const Caller& caller, Response& res,
                   std::shared_ptr<StreamLimiter::Lease>* lease) {
  if (s.streams == nullptr || caller.admin) return true;
  *lease = s.streams->Acquire(caller.tenant);
  if (*lease != nullptr) return true;
  res.set_header("Retry-After", "5");
  SendError(res, 429,
            absl::StrCat("tenant '", caller.tenant,
                         "' has as many streams open (followed logs and event streams) as weftd "
                         "allows (--follow-streams-per-tenant); close one or retry later"));
  return false;
}

void AddEventRoutes(Router& r, const Services& s) {
  r.Route("/v1/events", {{"GET", Bind(s, AllEvents)}});
  r.Route(R"(/v1/jobs/([^/]+)/events)", {{"GET", Bind(s, JobEvents)}});
}

}  // namespace weft::api
