// weft submit, list, show, follow, logs, metrics, audit, download, halt, resume, delete.
#include <unistd.h>

#include <chrono>
#include <deque>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/overrides.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/text.h"
#include "job/job_state.h"
#include "job/layout.h"

namespace weft::cli {

std::string Duration(double s) {
  if (s < 0) return "-";
  int t = static_cast<int>(s + 0.5);
  if (t >= 3600) return absl::StrFormat("%dh%02dm", t / 3600, (t % 3600) / 60);
  if (t >= 60) return absl::StrFormat("%dm%02ds", t / 60, t % 60);
  return absl::StrFormat("%ds", t);
}

int DownloadModel(const Client& api, const std::string& id, bool delivered, std::string out) {
  const std::string which = delivered ? kDeliveredModel : kFinalModel;
  Reply r = api.Call("GET", absl::StrCat("/v1/jobs/", id, "/model?which=", which));
  if (r.status != 200) return Fail(r);
  if (out.empty()) out = absl::StrCat(id, "-", which, ".pt");
  if (absl::Status s = WriteFileAtomic(out, r.body); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  std::cout << which << " model of " << id << " written to " << out << " (" << r.body.size()
            << " bytes)\n";
  return 0;
}

namespace {

// Whether a state (as the API names it) is one where nothing more happens until a person acts.
bool IsEnded(const std::string& state) {
  std::optional<JobState> s = ParseJobState(state);
  return s && IsSettled(*s);
}

// Prints where the models are and how good they are.
void PrintModels(const json& job) {
  if (!job.contains("models")) return;
  for (const char* kind : {kDeliveredModel, kFinalModel}) {
    if (!job["models"].contains(kind)) continue;
    const json& m = job["models"][kind];
    std::cout << absl::StrFormat("  %-9s model: test_accuracy %.4f (epoch %d, step %d)\n", kind,
                                 m.value("test_accuracy", 0.0), m.value("epoch", 0),
                                 m.value("step", 0))
              << "                   " << m.value("path", "") << "\n"
              << "                   weft download " << job.value("id", "") << " --" << kind
              << "\n";
  }
}

// The live line of `weft follow`, with an ETA from the step rate over the last minute.
class ProgressLine {
 public:
  std::string Of(const json& job) {
    const json& p = job["progress"];
    const json& m = job["metrics"];
    const std::string state = job.value("state", "?");
    if (state == "QUEUED" && job.contains("waiting_reason")) {
      return absl::StrCat("QUEUED  ", job.value("waiting_reason", ""));
    }
    const double now =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    const int64_t step = p.value("step", int64_t{0});
    const int64_t total = p.value("steps_total", int64_t{0});
    rate_.emplace_back(now, step);
    while (rate_.size() > 2 && now - rate_.front().first > 60) rate_.pop_front();
    double eta = -1;
    if (rate_.size() >= 2 && step > rate_.front().second && total > 0) {
      eta = (total - step) * (now - rate_.front().first) / (step - rate_.front().second);
    }
    return absl::StrFormat(
        "%s  epoch %d/%d  step %d/%d  loss %s  acc %s (best %s)  %s samples/s  ETA %s", state,
        p.value("epoch", 0), p.value("epochs_total", 0), step, total, Num(m, "train_loss", 4),
        Num(m, "test_accuracy", 4), Num(m, "best_test_accuracy", 4), Num(m, "samples_per_s", 0),
        Duration(eta));
  }

 private:
  std::deque<std::pair<double, int64_t>> rate_;  // (seconds, step) over the last ~60 s
};

// What `weft follow` shows of one job, built from its event stream: each state change with its
// reason, and a live progress line (redrawn on a terminal, every 10 s otherwise).
class FollowView {
 public:
  FollowView() : tty_(::isatty(STDOUT_FILENO)) {}

  // Takes one event of GET /v1/jobs/{id}/events; false once the job settled or was deleted.
  bool On(const SseEvent& e) {
    json data = json::parse(e.data, nullptr, false);
    if (!data.is_object()) return true;
    if (e.event == "job") {  // the opening snapshot (again after a reconnect)
      job_ = std::move(data);
      const json& hist = job_["history"];
      for (; seen_history_ < hist.size(); ++seen_history_) {
        const json& h = hist[seen_history_];
        Print(h.value("time", ""), h.value("to", ""), h.value("reason", ""));
      }
    } else if (e.event == "state") {
      ++seen_history_;
      Print(data.value("time", ""), data.value("state", ""), data.value("reason", ""));
      job_["state"] = data["state"];
      job_["reason"] = data["reason"];
      job_.erase("waiting_reason");
    } else if (e.event == "waiting") {
      job_["waiting_reason"] = data["reason"];
    } else if (e.event == "progress") {
      job_["progress"] = data["progress"];
      json& m = job_["metrics"];
      for (const json& p : data["metrics"]) {
        for (const char* key : {"train_loss", "samples_per_s", "test_accuracy"}) {
          if (p.contains(key)) m[key] = p[key];
        }
      }
      if (!data["best_test_accuracy"].is_null())
        m["best_test_accuracy"] = data["best_test_accuracy"];
    } else if (e.event == "deleted") {
      deleted_ = true;
      return false;
    }
    if (IsEnded(job_.value("state", ""))) return false;
    Redraw();
    return true;
  }

  bool deleted() const { return deleted_; }
  bool settled() const { return IsEnded(job_.value("state", "")); }
  // Ends the live line before something else is printed.
  void Clear() const {
    if (tty_) std::cout << "\r\033[K";
  }

 private:
  void Print(const std::string& time, const std::string& state, const std::string& reason) {
    Clear();
    std::cout << time << "  " << state << "  " << reason << "\n";
  }
  void Redraw() {
    const std::string line = progress_.Of(job_);
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      std::cout << "\r\033[K" << line << std::flush;
    } else if (now - last_plain_ > std::chrono::seconds(10)) {
      std::cout << line << "\n" << std::flush;
      last_plain_ = now;
    }
  }

  const bool tty_;
  json job_ = json::object();
  size_t seen_history_ = 0;  // the history entries printed
  bool deleted_ = false;
  ProgressLine progress_;
  std::chrono::steady_clock::time_point last_plain_ =
      std::chrono::steady_clock::now() - std::chrono::hours(1);
};

// Follows a job until it settles, on its event stream (GET /v1/jobs/{id}/events); reconnects
// while weftd restarts (up to 30 tries a second apart). Returns 0 if it COMPLETED.
int Follow(const Client& api, const std::string& id) {
  FollowView view;
  for (int failures = 0;;) {
    Reply r =
        api.Events("/v1/jobs/" + id + "/events", [&view](const SseEvent& e) { return view.On(e); });
    if (view.deleted()) {
      view.Clear();
      std::cout << "job " << id << " was deleted\n";
      return 1;
    }
    if (view.settled()) break;
    if (r.status != 0 && r.status != 200) {
      view.Clear();
      return Fail(r);
    }
    if (r.status == 200) failures = 0;  // ended without settling: read it again
    if (r.status == 0 && ++failures >= 30) {
      view.Clear();
      return Fail(r);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  // The final view, with the models and where to download them.
  Reply r = api.Call("GET", "/v1/jobs/" + id);
  view.Clear();
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  const std::string state = j.value("state", "?");
  std::cout << "job " << id << " " << state << ": " << j.value("reason", "") << "\n";
  PrintModels(j);
  return state == "COMPLETED" ? 0 : 1;
}

int Submit(const Client& api, const std::string& file, bool follow,
           const std::vector<std::string>& uploads, const std::vector<std::string>& sets) {
  auto read = ReadFile(file);
  if (!read.ok()) {
    std::cerr << "error: cannot read manifest " << file << ": " << read.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::string> text = ApplyOverrides(*read, sets);
  if (!text.ok()) {
    std::cerr << "error: " << file << ": " << text.status().message() << "\n";
    return 2;
  }
  for (const std::string& u : uploads) {
    const size_t eq = u.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == u.size()) {
      std::cerr << "error: --upload " << u << " must be NAME=PATH\n";
      return 2;
    }
    if (int code = UploadArtifact(api, u.substr(0, eq), u.substr(eq + 1)); code != 0) return code;
  }
  Reply r = api.Call("POST", "/v1/jobs", *text);
  if (r.status != 201) {
    if (r.status == 400) std::cerr << "manifest " << file << " rejected\n";
    return Fail(r);
  }
  json j = r.Json();
  std::string id = j.value("id", "");
  std::cout << "job " << id << " submitted (" << j.value("state", "") << ")\n";
  return follow ? Follow(api, id) : 0;
}

void PrintJobRows(const json& jobs) {
  for (const auto& job : jobs) {
    const json& p = job["progress"];
    std::cout << absl::StrFormat(
        "%-19s %-24s %-10s %-8s %-7s %-8s %s\n", job.value("id", ""), job.value("name", ""),
        job.value("state", ""), absl::StrCat(p.value("epoch", 0), "/", p.value("epochs_total", 0)),
        absl::StrFormat("%.0f%%", 100 * p.value("fraction", 0.0)),
        Num(job, "best_test_accuracy", 4),
        job.contains("waiting_reason") ? job.value("waiting_reason", "") : job.value("reason", ""));
  }
}

// Every job, a page (1,000 jobs) at a time.
int List(const Client& api) {
  std::cout << absl::StrFormat("%-19s %-24s %-10s %-8s %-7s %-8s %s\n", "ID", "NAME", "STATE",
                               "EPOCH", "DONE", "BEST", "REASON");
  for (std::string after;;) {
    Reply r = api.Call("GET", "/v1/jobs?limit=1000" + (after.empty() ? "" : "&after=" + after));
    if (r.status != 200) return Fail(r);
    const json j = r.Json();
    PrintJobRows(j["jobs"]);
    if (!j.contains("next")) return 0;
    after = j.value("next", "");
  }
}

// "learners:  rank 0 on node-a (pid 12); ..." and, for an elastic job, how many it holds of its
// range and its generation: "learners:  2 (elastic, 1 to 3, generation 2): rank 0 (learner 2)
// ...": a learner's id when it differs from its rank.
void PrintLearners(const json& j) {
  const json none = json::array();
  const json& learners = j.contains("learners") && j["learners"].is_array() ? j["learners"] : none;
  json range;
  if (j.contains("spec") && j["spec"].is_object() && j["spec"].contains("resources") &&
      j["spec"]["resources"].is_object()) {
    range = j["spec"]["resources"].value("learners", json());
  }
  const bool elastic = range.is_object();
  if (!elastic && learners.empty()) return;
  std::cout << "learners: ";
  if (elastic) {
    const int64_t generation = j.value("generation", int64_t{0});
    std::cout << " " << learners.size() << " (elastic, " << range.value("min", 0) << " to "
              << range.value("max", 0)
              << (generation > 1 ? ", generation " + std::to_string(generation) : std::string())
              << ")" << (learners.empty() ? "" : ":");
  }
  for (const auto& l : learners) {
    const int rank = l.value("rank", 0), id = l.value("id", rank);
    std::vector<std::string> gpus;
    if (l.contains("gpus") && l["gpus"].is_array()) {
      for (const auto& g : l["gpus"]) gpus.push_back(g.dump());
    }
    std::cout << " rank " << rank
              << (id != rank ? " (learner " + std::to_string(id) + ")" : std::string()) << " on "
              << l.value("node", "")
              << (gpus.empty() ? std::string()
                               : absl::StrCat(gpus.size() == 1 ? " GPU " : " GPUs ",
                                              absl::StrJoin(gpus, ",")))
              << (l["pid"].is_number() ? " (pid " + std::to_string(l["pid"].get<int64_t>()) + ")"
                                       : std::string())
              << ";";
  }
  std::cout << "\n";
  // A scale-out parameter-server job's weft-ps servers, by shard.
  const json& servers = j.contains("servers") ? j["servers"] : json::array();
  if (!servers.is_array() || servers.empty()) return;
  std::cout << "servers: ";
  for (const auto& s : servers) {
    std::cout << " " << s.value("index", 0) << " on " << s.value("node", "") << " at "
              << s.value("address", "")
              << (s["pid"].is_number() ? " (pid " + std::to_string(s["pid"].get<int64_t>()) + ")"
                                       : std::string())
              << ";";
  }
  std::cout << "\n";
}

void PrintTargets(const json& j) {
  for (const char* t : {"deliver", "complete"}) {
    if (!j["targets"].contains(t)) continue;
    const json& tj = j["targets"][t];
    std::cout << absl::StrFormat(
        "target:    %-8s %s >= %.4g  %s\n", t, j["targets"].value("metric", ""),
        tj.value("value", 0.0),
        tj.value("met", false) ? "met at " + tj.value("met_at", "") : std::string("not met"));
  }
}

int Show(const Client& api, const std::string& id, bool as_json) {
  Reply r = api.Call("GET", "/v1/jobs/" + id);
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const json& p = j["progress"];
  std::cout << "id:        " << j.value("id", "") << "\n"
            << "name:      " << j.value("name", "") << "\n"
            << "tenant:    " << j.value("tenant", "") << "\n"
            << "state:     " << j.value("state", "") << " (" << j.value("reason", "") << ")\n";
  if (j.contains("waiting_reason")) {
    std::cout << "waiting:   " << j.value("waiting_reason", "") << " ["
              << j.value("waiting_code", "") << "]\n";
  }
  PrintLearners(j);
  if (const double gpu_s = j.value("gpu_seconds", 0.0); gpu_s > 0) {
    std::cout << absl::StrFormat("gpu time:  %.1f GPU-seconds\n", gpu_s);
  }
  std::cout << "progress:  epoch " << p.value("epoch", 0) << "/" << p.value("epochs_total", 0)
            << ", step " << p.value("step", 0) << "/" << p.value("steps_total", 0) << ", "
            << p.value("samples", 0) << " samples\n"
            << "metrics:   train_loss " << Num(j["metrics"], "train_loss", 4) << ", test_accuracy "
            << Num(j["metrics"], "test_accuracy", 4) << " (best "
            << Num(j["metrics"], "best_test_accuracy", 4) << "), "
            << Num(j["metrics"], "samples_per_s", 0) << " samples/s\n";
  PrintTargets(j);
  PrintModels(j);
  std::cout << "history:\n";
  for (const auto& e : j["history"]) {
    std::cout << "  " << e.value("time", "") << "  " << absl::StrFormat("%-10s", e.value("to", ""))
              << e.value("reason", "") << "\n";
  }
  return 0;
}

int Metrics(const Client& api, const std::string& id, bool as_json) {
  // The whole series, page by page from the first point.
  json j;
  for (int64_t from = 0;;) {
    Reply r = api.Call("GET", absl::StrCat("/v1/jobs/", id, "/metrics?limit=10000&from=", from));
    if (r.status != 200) return Fail(r);
    json page = r.Json();
    if (j.is_null()) {
      j = page;
    } else {
      for (auto& p : page["points"]) j["points"].push_back(std::move(p));
    }
    if (!page.contains("next")) break;
    from = page["next"].get<int64_t>();
  }
  j.erase("next");
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-8s %-6s %-24s %-11s %-10s %s\n", "STEP", "EPOCH", "TIME",
                               "TRAIN_LOSS", "SAMPLES/S", "TEST_ACCURACY");
  for (const auto& m : j["points"]) {
    std::cout << absl::StrFormat(
        "%-8d %-6d %-24s %-11s %-10s %s\n", m.value("step", 0), m.value("epoch", 0),
        FormatTimeMs(m.value("wall_time_ms", TimeMs{0})), Num(m, "train_loss", 4),
        Num(m, "samples_per_s", 0), Num(m, "test_accuracy", 4));
  }
  return 0;
}

// One learner's log (`rank`), or a scale-out parameter-server job's server's (`server` >= 0).
// A log is what a tenant's program printed: on a terminal its control characters are shown, not
// obeyed (common/text.h TerminalText), unless `raw`; into a pipe or a file it goes as it is.
int Logs(const Client& api, const std::string& id, int rank, int server, bool follow, bool raw) {
  const std::string query = server >= 0 ? "server=" + std::to_string(server)
                            : rank > 0  ? "rank=" + std::to_string(rank)
                                        : "";
  const bool escape = !raw && isatty(STDOUT_FILENO) == 1;
  TerminalText terminal;
  auto print = [&](std::string_view piece) {
    if (escape) {
      std::cout << terminal.Feed(piece);
    } else {
      std::cout << piece;
    }
    std::cout.flush();
  };
  if (!follow) {
    Reply r = api.Call("GET", "/v1/jobs/" + id + "/logs" + (query.empty() ? "" : "?" + query));
    if (r.status != 200) return Fail(r);
    print(r.body);
  } else {
    std::string error;
    if (!api.Stream("/v1/jobs/" + id + "/logs?follow=true" + (query.empty() ? "" : "&" + query),
                    print, &error)) {
      std::cerr << "error: " << error << "\n";
      return 1;
    }
  }
  if (escape) std::cout << terminal.Finish();
  return 0;
}

// Prints the job's data audit, epoch by epoch; 0 only when every epoch is exact.
int Audit(const Client& api, const std::string& id, bool as_json) {
  Reply r = api.Call("GET", "/v1/jobs/" + id + "/audit");
  if (r.status != 200) return Fail(r);
  nlohmann::json a = nlohmann::json::parse(r.body, nullptr, false);
  if (!a.is_object()) {
    std::cerr << "error: weftd's answer is not JSON\n";
    return 1;
  }
  const bool exact = a.value("exact", false);
  if (as_json) {
    std::cout << a.dump(2) << "\n";
    return exact ? 0 : 1;
  }
  std::cout << absl::StrFormat("job %s: %d steps applied, %d rolled back (%d torn records)\n", id,
                               a.value("steps_applied", 0), a.value("steps_rolled_back", 0),
                               a.value("torn_records", 0));
  for (const auto& e : a.value("epochs", nlohmann::json::array())) {
    std::string verdict = !e.value("exact", false) ? "NOT EXACT"
                          : e.value("partial", false)
                              ? "partial: the lineage ends in this epoch, nothing twice"
                              : "exact";
    std::cout << absl::StrFormat(
        "epoch %d: %d samples, %d once, %d missing, %d twice, %d out of range: %s\n",
        e.value("epoch", 0), e.value("samples", 0), e.value("once", 0), e.value("missing", 0),
        e.value("twice", 0), e.value("out_of_range", 0), verdict);
  }
  for (const auto& p : a.value("problems", nlohmann::json::array())) {
    std::cout << "problem: " << p.get<std::string>() << "\n";
  }
  std::cout << (exact ? "exact: every sample of every epoch was trained by exactly one applied "
                        "step of the model's lineage\n"
                      : "NOT EXACT\n");
  return exact ? 0 : 1;
}

// The values the job subcommands parse into; they live as long as the app's callbacks.
struct Args {
  std::string file, id, out;
  std::vector<std::string> uploads, sets;
  bool follow = false, as_json = false, delivered = false, final_model = false, raw = false;
  int rank = 0;
  int server = -1;  // logs --server
};

CLI::App* WithId(CLI::App& app, const char* name, const char* about, Args& a) {
  CLI::App* cmd = app.add_subcommand(name, about);
  cmd->add_option("ID", a.id, "job id")->required();
  return cmd;
}

}  // namespace

void AddJobCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* submit = app.add_subcommand("submit", "submit a job manifest (YAML or JSON)");
  submit->add_option("FILE", a->file, "manifest file")->required();
  submit->add_flag("--follow,-f", a->follow,
                   "follow the job with a live progress line until it ends");
  submit->add_option("--upload", a->uploads,
                     "NAME=PATH: upload the file as artifact NAME first (repeat for several)");
  submit->add_option("--set", a->sets,
                     "FIELD=VALUE: set a field of the manifest first, e.g. "
                     "training.learning_rate=3e-4 (repeat for several; VALUE is YAML)");
  run(submit, [](const Client& c, const Args& x) {
    return Submit(c, x.file, x.follow, x.uploads, x.sets);
  });
  run(app.add_subcommand("list", "list jobs"),
      [](const Client& c, const Args&) { return List(c); });
  auto* show = WithId(app, "show", "show a job: state, progress, targets, models, history", *a);
  show->add_flag("--json", a->as_json, "print the API's JSON");
  run(show, [](const Client& c, const Args& x) { return Show(c, x.id, x.as_json); });
  run(WithId(app, "follow", "follow a job with a live progress line until it ends", *a),
      [](const Client& c, const Args& x) { return Follow(c, x.id); });
  auto* logs = WithId(app, "logs", "print a job's learner log", *a);
  logs->add_flag("--follow,-f", a->follow, "keep streaming until the job ends");
  auto* rank =
      logs->add_option("--rank", a->rank, "which learner of a multi-learner job (default 0)")
          ->check(CLI::NonNegativeNumber);
  logs->add_option("--server", a->server,
                   "a weft-ps server's log instead (training.ps.servers > 1), 0 to servers - 1")
      ->check(CLI::NonNegativeNumber)
      ->excludes(rank);
  logs->add_flag("--raw", a->raw,
                 "print the log's bytes as they are on a terminal too (by default a terminal "
                 "shows its control characters, e.g. ESC as ^[, and does not obey them)");
  run(logs, [](const Client& c, const Args& x) {
    return Logs(c, x.id, x.rank, x.server, x.follow, x.raw);
  });
  auto* metrics = WithId(app, "metrics", "print a job's metric time series", *a);
  metrics->add_flag("--json", a->as_json, "print the API's JSON");
  run(metrics, [](const Client& c, const Args& x) { return Metrics(c, x.id, x.as_json); });
  auto* audit = WithId(app, "audit",
                       "check a job's data audit: every sample of every epoch trained exactly "
                       "once (weftd with WEFT_LEARNER_AUDIT=1)",
                       *a);
  audit->add_flag("--json", a->as_json, "print the API's JSON");
  run(audit, [](const Client& c, const Args& x) { return Audit(c, x.id, x.as_json); });
  auto* download = WithId(app, "download", "download a job's model", *a);
  auto* g = download->add_option_group("which");
  g->add_flag("--delivered", a->delivered, "the model delivered when targets.deliver was met");
  g->add_flag("--final", a->final_model, "the final model (default)");
  g->require_option(0, 1);
  download->add_option("-o,--output", a->out, "output path (default ID-KIND.pt)");
  run(download,
      [](const Client& c, const Args& x) { return DownloadModel(c, x.id, x.delivered, x.out); });
  run(WithId(app, "halt", "stop a job (it can be resumed)", *a),
      [](const Client& c, const Args& x) {
        return Act(c, "POST", "/v1/jobs/" + x.id + "/halt", "halted " + x.id);
      });
  run(WithId(app, "resume", "put a halted job back in the queue", *a),
      [](const Client& c, const Args& x) {
        return Act(c, "POST", "/v1/jobs/" + x.id + "/resume", "resumed " + x.id);
      });
  run(WithId(app, "delete", "stop a job and remove it with all its files", *a),
      [](const Client& c, const Args& x) {
        return Act(c, "DELETE", "/v1/jobs/" + x.id, "deleted " + x.id);
      });
}

}  // namespace weft::cli
