#include "cli/cli.h"

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/files.h"
#include "job/job_state.h"
#include "nlohmann/json.hpp"

namespace weft::cli {
namespace {

using nlohmann::json;

constexpr char kDefaultServer[] = "http://127.0.0.1:8470";

struct Reply {
  int status = 0;  // 0: no answer
  std::string body;
  std::string error;  // transport error
  json Json() const { return json::parse(body, nullptr, false); }
};

class Api {
 public:
  Api(std::string server, std::string token) : server_(std::move(server)), token_(std::move(token)) {
    if (server_.find("://") == std::string::npos) server_ = "http://" + server_;
  }
  const std::string& server() const { return server_; }

  Reply Call(const std::string& method, const std::string& path, const std::string& body = "",
             const std::string& content_type = "application/yaml") {
    httplib::Client c(server_);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(120, 0);
    if (!token_.empty()) c.set_bearer_token_auth(token_);
    httplib::Result r{nullptr, httplib::Error::Unknown};
    if (method == "GET") r = c.Get(path);
    if (method == "POST") r = c.Post(path, body, content_type);
    if (method == "PATCH") r = c.Patch(path, body, content_type);
    if (method == "DELETE") r = c.Delete(path);
    Reply out;
    if (!r) {
      out.error = absl::StrCat("cannot reach weftd at ", server_, ": ", httplib::to_string(r.error()),
                               " (is weftd running? set --server or WEFT_SERVER)");
      return out;
    }
    out.status = r->status;
    out.body = r->body;
    return out;
  }

  // Streams a GET body to `out` as it arrives. Returns false on a transport error.
  bool Stream(const std::string& path, std::ostream& out, std::string* error) {
    httplib::Client c(server_);
    c.set_read_timeout(24 * 3600, 0);
    if (!token_.empty()) c.set_bearer_token_auth(token_);
    int status = 0;
    std::string err_body;
    auto r = c.Get(path, [&](const httplib::Response& resp) {
                       status = resp.status;
                       return true;
                     },
                   [&](const char* data, size_t n) {
                     if (status == 200) {
                       out.write(data, static_cast<std::streamsize>(n));
                       out.flush();
                     } else {
                       err_body.append(data, n);
                     }
                     return true;
                   });
    if (!r) {
      *error = absl::StrCat("cannot reach weftd at ", server_, ": ", httplib::to_string(r.error()));
      return false;
    }
    if (status != 200) {
      json j = json::parse(err_body, nullptr, false);
      *error = j.is_object() && j.contains("error") ? j["error"].value("message", err_body) : err_body;
      return false;
    }
    return true;
  }

 private:
  std::string server_;
  std::string token_;
};

// Prints an error reply; returns the exit code.
int Fail(const Reply& r) {
  if (r.status == 0) {
    std::cerr << "error: " << r.error << "\n";
    return 2;
  }
  json j = r.Json();
  if (j.is_object() && j.contains("error")) {
    std::cerr << "error: " << j["error"].value("message", "") << "\n";
    if (j["error"].contains("details")) {
      for (const auto& d : j["error"]["details"]) {
        std::cerr << "  " << d.value("field", "") << ": " << d.value("problem", "") << "\n";
      }
    }
  } else {
    std::cerr << "error: HTTP " << r.status << ": " << r.body << "\n";
  }
  return 1;
}

// "cpus=4,memory=8GiB,gpus=0" (memory in MiB unless suffixed MiB/M or GiB/G) -> quota JSON;
// "none" -> null. Empty string and false on a bad spec, with `error` set.
bool ParseQuota(const std::string& text, json* out, std::string* error) {
  if (text == "none") {
    *out = nullptr;
    return true;
  }
  json q = json::object();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    std::string key = kv.first, val = kv.second;
    if (key == "cpus") {
      double v;
      if (!absl::SimpleAtod(val, &v) || v < 0) return *error = "cpus must be a non-negative number", false;
      q["cpus"] = v;
    } else if (key == "memory" || key == "memory_mb") {
      int64_t mult = 1;
      std::string num = val;
      for (auto [suffix, m] : std::vector<std::pair<std::string, int64_t>>{
               {"GiB", 1024}, {"G", 1024}, {"GB", 1024}, {"MiB", 1}, {"M", 1}, {"MB", 1}}) {
        if (absl::EndsWith(num, suffix)) {
          num.resize(num.size() - suffix.size());
          mult = m;
          break;
        }
      }
      double v;
      if (!absl::SimpleAtod(num, &v) || v < 0) {
        return *error = "memory must be like 512MiB or 8GiB", false;
      }
      q["memory_mb"] = static_cast<int64_t>(v * mult);
    } else if (key == "gpus") {
      int v;
      if (!absl::SimpleAtoi(val, &v) || v < 0) return *error = "gpus must be a non-negative integer", false;
      q["gpus"] = v;
    } else {
      *error = absl::StrCat("unknown quota resource '", key, "'; use cpus=, memory=, gpus=");
      return false;
    }
  }
  *out = q;
  return true;
}

std::string QuotaText(const json& t) {
  if (!t.contains("quota") || t["quota"].is_null()) return "none";
  const json& q = t["quota"];
  return absl::StrFormat("cpus=%g,memory=%dMiB,gpus=%d", q.value("cpus", 0.0), q.value("memory_mb", int64_t{0}),
                         q.value("gpus", 0));
}

int Tenants(Api& api, bool usage) {
  Reply r = api.Call("GET", "/v1/tenants");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (usage) {
    std::cout << absl::StrFormat("%-16s %6s %8s %8s %10s %10s %10s\n", "TENANT", "WEIGHT", "RUNNING",
                                 "QUEUED", "USED CPUS", "SHARE", "FAIR SHARE");
  } else {
    std::cout << absl::StrFormat("%-16s %6s %-36s %s\n", "TENANT", "WEIGHT", "QUOTA", "CREATED");
  }
  for (const auto& t : j["tenants"]) {
    if (usage) {
      const json& u = t["usage"];
      std::cout << absl::StrFormat("%-16s %6g %8d %8d %10g %9.1f%% %9.1f%%\n", t.value("name", ""),
                                   t.value("weight", 1.0), u.value("running_jobs", 0), u.value("queued_jobs", 0),
                                   u["used"].value("cpus", 0.0), 100 * u.value("dominant_share", 0.0),
                                   100 * u.value("fair_share", 0.0));
    } else {
      std::cout << absl::StrFormat("%-16s %6g %-36s %s\n", t.value("name", ""), t.value("weight", 1.0),
                                   QuotaText(t), t.value("created", ""));
    }
  }
  return 0;
}

int Queue(Api& api) {
  Reply r = api.Call("GET", "/v1/queue");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (j["queue"].empty()) {
    std::cout << "the queue is empty\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-4s %-22s %-12s %-10s %8s  %s\n", "#", "JOB", "TENANT", "STATE", "PRIORITY",
                               "REASON");
  for (const auto& e : j["queue"]) {
    std::cout << absl::StrFormat("%-4d %-22s %-12s %-10s %8d  %s\n", e.value("position", 0), e.value("id", ""),
                                 e.value("tenant", ""), e.value("state", ""), e.value("priority", 0),
                                 e.value("reason", ""));
  }
  return 0;
}

int Nodes(Api& api) {
  Reply r = api.Call("GET", "/v1/nodes");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat("%-12s %13s %17s %9s  %s\n", "NODE", "CPUS", "MEMORY MiB", "GPUS", "JOBS");
  for (const auto& n : j["nodes"]) {
    const json &cap = n["capacity"], &al = n["allocated"];
    std::vector<std::string> jobs;
    for (const auto& job : n["jobs"]) jobs.push_back(job.value("id", ""));
    if (n.value("other_tenants_jobs", 0) > 0) {
      jobs.push_back(absl::StrCat("+", n.value("other_tenants_jobs", 0), " of other tenants"));
    }
    std::cout << absl::StrFormat("%-12s %6g/%-6g %8d/%-8d %4d/%-4d  %s\n", n.value("name", ""),
                                 al.value("cpus", 0.0), cap.value("cpus", 0.0), al.value("memory_mb", int64_t{0}),
                                 cap.value("memory_mb", int64_t{0}), al.value("gpus", 0), cap.value("gpus", 0),
                                 absl::StrJoin(jobs, ", "));
  }
  return 0;
}

// j[key] with `decimals` decimals, or "-" when absent.
std::string Num(const json& j, const char* key, int decimals) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  return absl::StrFormat("%.*f", decimals, j[key].get<double>());
}

std::string Duration(double s) {
  if (s < 0) return "-";
  int t = static_cast<int>(s + 0.5);
  if (t >= 3600) return absl::StrFormat("%dh%02dm", t / 3600, (t % 3600) / 60);
  if (t >= 60) return absl::StrFormat("%dm%02ds", t / 60, t % 60);
  return absl::StrFormat("%ds", t);
}

// Whether a state (as the API names it) is one where nothing more happens until a person acts.
bool IsEnded(const std::string& state) {
  std::optional<JobState> s = ParseJobState(state);
  return s && IsSettled(*s);
}

// Prints where the models are and how good they are.
void PrintModels(const json& job) {
  if (!job.contains("models")) return;
  for (const char* kind : {"delivered", "final"}) {
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

// Follows a job until it ends, with a live progress line. Returns 0 if it COMPLETED.
int Follow(Api& api, const std::string& id) {
  bool tty = ::isatty(STDOUT_FILENO);
  size_t seen_history = 0;
  std::deque<std::pair<double, int64_t>> rate;  // (seconds, step) over the last ~60 s
  auto last_plain = std::chrono::steady_clock::now() - std::chrono::hours(1);
  int failures = 0;
  while (true) {
    Reply r = api.Call("GET", "/v1/jobs/" + id);
    if (r.status != 200) {
      if (r.status == 0 && ++failures < 30) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      if (tty) std::cout << "\n";
      return Fail(r);
    }
    failures = 0;
    json j = r.Json();
    std::string state = j.value("state", "?");
    const json& hist = j["history"];
    for (; seen_history < hist.size(); ++seen_history) {
      const json& e = hist[seen_history];
      if (tty) std::cout << "\r\033[K";
      std::cout << e.value("time", "") << "  " << e.value("to", "") << "  " << e.value("reason", "")
                << "\n";
    }
    const json& p = j["progress"];
    const json& m = j["metrics"];
    double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t step = p.value("step", int64_t{0});
    int64_t total = p.value("steps_total", int64_t{0});
    rate.emplace_back(now, step);
    while (rate.size() > 2 && now - rate.front().first > 60) rate.pop_front();
    double eta = -1;
    if (rate.size() >= 2 && step > rate.front().second && total > 0) {
      double steps_per_s = (step - rate.front().second) / (now - rate.front().first);
      eta = (total - step) / steps_per_s;
    }
    std::string line = absl::StrFormat(
        "%s  epoch %d/%d  step %d/%d  loss %s  acc %s (best %s)  %s samples/s  ETA %s", state,
        p.value("epoch", 0), p.value("epochs_total", 0), step, total, Num(m, "train_loss", 4),
        Num(m, "test_accuracy", 4), Num(m, "best_test_accuracy", 4),
        Num(m, "samples_per_s", 0), Duration(eta));
    if (state == "QUEUED" && j.contains("waiting_reason")) {
      line = absl::StrCat("QUEUED  ", j.value("waiting_reason", ""));
    }
    if (IsEnded(state)) {
      if (tty) std::cout << "\r\033[K";
      std::cout << "job " << id << " " << state << ": " << j.value("reason", "") << "\n";
      PrintModels(j);
      return state == "COMPLETED" ? 0 : 1;
    }
    auto wall = std::chrono::steady_clock::now();
    if (tty) {
      std::cout << "\r\033[K" << line << std::flush;
    } else if (wall - last_plain > std::chrono::seconds(10)) {
      std::cout << line << "\n" << std::flush;
      last_plain = wall;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Submit(Api& api, const std::string& file, bool follow) {
  auto text = ReadFile(file);
  if (!text.ok()) {
    std::cerr << "error: cannot read manifest " << file << ": " << text.status().message() << "\n";
    return 2;
  }
  Reply r = api.Call("POST", "/v1/jobs", *text);
  if (r.status != 201) {
    if (r.status == 400) std::cerr << "manifest " << file << " rejected\n";
    return Fail(r);
  }
  json j = r.Json();
  std::string id = j.value("id", "");
  std::cout << "job " << id << " submitted (" << j.value("state", "") << ")\n";
  if (!follow) return 0;
  return Follow(api, id);
}

int List(Api& api) {
  Reply r = api.Call("GET", "/v1/jobs");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << absl::StrFormat("%-19s %-24s %-10s %-8s %-7s %-8s %s\n", "ID", "NAME", "STATE",
                               "EPOCH", "DONE", "BEST", "REASON");
  for (const auto& job : j["jobs"]) {
    const json& p = job["progress"];
    std::cout << absl::StrFormat(
        "%-19s %-24s %-10s %-8s %-7s %-8s %s\n", job.value("id", ""), job.value("name", ""),
        job.value("state", ""), absl::StrCat(p.value("epoch", 0), "/", p.value("epochs_total", 0)),
        absl::StrFormat("%.0f%%", 100 * p.value("fraction", 0.0)),
        Num(job, "best_test_accuracy", 4),
        job.contains("waiting_reason") ? job.value("waiting_reason", "") : job.value("reason", ""));
  }
  return 0;
}

int Show(Api& api, const std::string& id, bool as_json) {
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
  if (j.contains("waiting_reason")) std::cout << "waiting:   " << j.value("waiting_reason", "") << "\n";
  if (j.contains("learners") && !j["learners"].empty()) {
    std::cout << "learners: ";
    for (const auto& l : j["learners"]) {
      std::cout << " rank " << l.value("rank", 0) << " on " << l.value("node", "")
                << (l["pid"].is_number() ? " (pid " + std::to_string(l["pid"].get<int64_t>()) + ")"
                                         : std::string())
                << ";";
    }
    std::cout << "\n";
  }
  std::cout << "progress:  epoch " << p.value("epoch", 0) << "/" << p.value("epochs_total", 0)
            << ", step " << p.value("step", 0) << "/" << p.value("steps_total", 0) << ", "
            << p.value("samples", 0) << " samples\n"
            << "metrics:   train_loss " << Num(j["metrics"], "train_loss", 4)
            << ", test_accuracy " << Num(j["metrics"], "test_accuracy", 4) << " (best "
            << Num(j["metrics"], "best_test_accuracy", 4) << "), "
            << Num(j["metrics"], "samples_per_s", 0) << " samples/s\n";
  for (const char* t : {"deliver", "complete"}) {
    if (!j["targets"].contains(t)) continue;
    const json& tj = j["targets"][t];
    std::cout << absl::StrFormat("target:    %-8s %s >= %.4g  %s\n", t,
                                 j["targets"].value("metric", ""), tj.value("value", 0.0),
                                 tj.value("met", false) ? "met at " + tj.value("met_at", "")
                                                        : std::string("not met"));
  }
  PrintModels(j);
  std::cout << "history:\n";
  for (const auto& e : j["history"]) {
    std::cout << "  " << e.value("time", "") << "  " << absl::StrFormat("%-10s", e.value("to", ""))
              << e.value("reason", "") << "\n";
  }
  return 0;
}

int Metrics(Api& api, const std::string& id, bool as_json) {
  Reply r = api.Call("GET", "/v1/jobs/" + id + "/metrics");
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-8s %-6s %-24s %-11s %-10s %s\n", "STEP", "EPOCH", "TIME",
                               "TRAIN_LOSS", "SAMPLES/S", "TEST_ACCURACY");
  for (const auto& m : j["points"]) {
    TimeMs t = m.value("wall_time_ms", TimeMs{0});
    std::cout << absl::StrFormat("%-8d %-6d %-24s %-11s %-10s %s\n", m.value("step", 0),
                                 m.value("epoch", 0),
                                 FormatTimeMs(t),
                                 Num(m, "train_loss", 4), Num(m, "samples_per_s", 0),
                                 Num(m, "test_accuracy", 4));
  }
  return 0;
}

int Download(Api& api, const std::string& id, bool delivered, std::string out) {
  std::string which = delivered ? "delivered" : "final";
  Reply r = api.Call("GET", absl::StrCat("/v1/jobs/", id, "/model?which=", which));
  if (r.status != 200) return Fail(r);
  if (out.empty()) out = absl::StrCat(id, "-", which, ".pt");
  absl::Status s = WriteFileAtomic(out, r.body);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  std::cout << which << " model of " << id << " written to " << out << " (" << r.body.size()
            << " bytes)\n";
  return 0;
}

int Simple(Api& api, const std::string& method, const std::string& path, const std::string& done) {
  Reply r = api.Call(method, path);
  if (r.status != 200) return Fail(r);
  json j = r.Json();
  std::cout << done;
  if (j.contains("state")) std::cout << " (" << j.value("state", "") << ")";
  std::cout << "\n";
  return 0;
}

}  // namespace

int Run(int argc, char** argv) {
  CLI::App app{"weft: submit and follow training jobs on a weft cluster"};
  app.require_subcommand(1);
  const char* env = std::getenv("WEFT_SERVER");
  std::string server = env && *env ? env : kDefaultServer;
  app.add_option("--server", server, "weftd's REST address (default $WEFT_SERVER or " +
                                         std::string(kDefaultServer) + ")");
  const char* token_env = std::getenv("WEFT_TOKEN");
  std::string token = token_env ? token_env : "";
  app.add_option("--token", token,
                 "bearer token (default $WEFT_TOKEN): a tenant token, or the admin token from "
                 "<data-dir>/admin.token for tenant and token commands");

  std::string file, id, out;
  bool follow = false, as_json = false, delivered = false, final_model = false;

  auto* submit = app.add_subcommand("submit", "submit a job manifest (YAML or JSON)");
  submit->add_option("FILE", file, "manifest file")->required();
  submit->add_flag("--follow,-f", follow, "follow the job with a live progress line until it ends");
  auto* list = app.add_subcommand("list", "list jobs");
  auto* show = app.add_subcommand("show", "show a job: state, progress, targets, models, history");
  show->add_option("ID", id, "job id")->required();
  show->add_flag("--json", as_json, "print the API's JSON");
  auto* fol = app.add_subcommand("follow", "follow a job with a live progress line until it ends");
  fol->add_option("ID", id, "job id")->required();
  auto* logs = app.add_subcommand("logs", "print a job's learner log");
  logs->add_option("ID", id, "job id")->required();
  logs->add_flag("--follow,-f", follow, "keep streaming until the job ends");
  int rank = 0;
  logs->add_option("--rank", rank, "which learner of a multi-learner job (default 0)")
      ->check(CLI::NonNegativeNumber);
  auto* metrics = app.add_subcommand("metrics", "print a job's metric time series");
  metrics->add_option("ID", id, "job id")->required();
  metrics->add_flag("--json", as_json, "print the API's JSON");
  auto* download = app.add_subcommand("download", "download a job's model");
  download->add_option("ID", id, "job id")->required();
  auto* g = download->add_option_group("which");
  g->add_flag("--delivered", delivered, "the model delivered when targets.deliver was met");
  g->add_flag("--final", final_model, "the final model (default)");
  g->require_option(0, 1);
  download->add_option("-o,--output", out, "output path (default ID-KIND.pt)");
  auto* halt = app.add_subcommand("halt", "stop a job (it can be resumed)");
  halt->add_option("ID", id, "job id")->required();
  auto* resume = app.add_subcommand("resume", "put a halted job back in the queue");
  resume->add_option("ID", id, "job id")->required();
  auto* del = app.add_subcommand("delete", "stop a job and remove it with all its files");
  del->add_option("ID", id, "job id")->required();
  auto* queue = app.add_subcommand("queue", "the queue in order, with why each job waits");
  auto* nodes = app.add_subcommand("nodes", "each node's capacity, allocation and jobs");

  std::string name, quota, token_id;
  double weight = 0;
  auto* tenant = app.add_subcommand("tenant", "manage tenants (admin token)");
  tenant->require_subcommand(1);
  auto* t_create = tenant->add_subcommand("create", "create a tenant");
  t_create->add_option("NAME", name, "tenant name")->required();
  t_create->add_option("--quota", quota, "e.g. cpus=4,memory=8GiB,gpus=0 (default: no quota)");
  t_create->add_option("--weight", weight, "fair-share weight (default 1)");
  auto* t_list = tenant->add_subcommand("list", "list tenants with their quota and weight");
  auto* t_usage = tenant->add_subcommand("usage", "each tenant's share of the cluster vs its fair share");
  auto* t_update = tenant->add_subcommand("update", "change a tenant's quota or weight");
  t_update->add_option("NAME", name, "tenant name")->required();
  t_update->add_option("--quota", quota, "e.g. cpus=8,memory=16GiB,gpus=0, or none");
  t_update->add_option("--weight", weight, "fair-share weight");
  auto* t_delete = tenant->add_subcommand("delete", "delete a tenant (refused while it owns jobs)");
  t_delete->add_option("NAME", name, "tenant name")->required();
  auto* tok = app.add_subcommand("token", "manage a tenant's bearer tokens (admin token)");
  tok->require_subcommand(1);
  auto* k_create = tok->add_subcommand("create", "create a token for a tenant (shown once)");
  k_create->add_option("TENANT", name, "tenant name")->required();
  auto* k_list = tok->add_subcommand("list", "list a tenant's token ids");
  k_list->add_option("TENANT", name, "tenant name")->required();
  auto* k_revoke = tok->add_subcommand("revoke", "revoke a token");
  k_revoke->add_option("TENANT", name, "tenant name")->required();
  k_revoke->add_option("ID", token_id, "token id (tok-...)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  Api api(server, token);
  if (queue->parsed()) return Queue(api);
  if (nodes->parsed()) return Nodes(api);
  if (t_list->parsed()) return Tenants(api, false);
  if (t_usage->parsed()) return Tenants(api, true);
  if (t_create->parsed() || t_update->parsed()) {
    json body = json::object();
    if (t_create->parsed()) body["name"] = name;
    if (!quota.empty()) {
      std::string error;
      json q;
      if (!ParseQuota(quota, &q, &error)) {
        std::cerr << "error: --quota: " << error << "\n";
        return 2;
      }
      body["quota"] = q;
    }
    if (weight != 0) body["weight"] = weight;
    Reply r = t_create->parsed() ? api.Call("POST", "/v1/tenants", body.dump(), "application/json")
                                 : api.Call("PATCH", "/v1/tenants/" + name, body.dump(), "application/json");
    if (r.status != 200 && r.status != 201) return Fail(r);
    json t = r.Json();
    std::cout << (t_create->parsed() ? "created" : "updated") << " tenant " << t.value("name", "")
              << " (quota " << QuotaText(t) << ", weight " << t.value("weight", 1.0) << ")\n";
    return 0;
  }
  if (t_delete->parsed()) return Simple(api, "DELETE", "/v1/tenants/" + name, "deleted tenant " + name);
  if (k_create->parsed()) {
    Reply r = api.Call("POST", "/v1/tenants/" + name + "/tokens", "", "application/json");
    if (r.status != 201) return Fail(r);
    json t = r.Json();
    std::cerr << "token " << t.value("id", "") << " for tenant " << name
              << " (shown only now; weft keeps only its SHA-256):\n";
    std::cout << t.value("token", "") << "\n";
    return 0;
  }
  if (k_list->parsed()) {
    Reply r = api.Call("GET", "/v1/tenants/" + name + "/tokens");
    if (r.status != 200) return Fail(r);
    for (const auto& t : r.Json()["tokens"]) {
      std::cout << absl::StrFormat("%-16s created %s%s\n", t.value("id", ""), t.value("created", ""),
                                   t["revoked"].is_null() ? "" : "  REVOKED " + t["revoked"].get<std::string>());
    }
    return 0;
  }
  if (k_revoke->parsed()) {
    return Simple(api, "DELETE", "/v1/tenants/" + name + "/tokens/" + token_id, "revoked " + token_id);
  }
  if (submit->parsed()) return Submit(api, file, follow);
  if (list->parsed()) return List(api);
  if (show->parsed()) return Show(api, id, as_json);
  if (fol->parsed()) return Follow(api, id);
  if (metrics->parsed()) return Metrics(api, id, as_json);
  if (download->parsed()) return Download(api, id, delivered, out);
  if (halt->parsed()) return Simple(api, "POST", "/v1/jobs/" + id + "/halt", "halted " + id);
  if (resume->parsed()) return Simple(api, "POST", "/v1/jobs/" + id + "/resume", "resumed " + id);
  if (del->parsed()) return Simple(api, "DELETE", "/v1/jobs/" + id, "deleted " + id);
  if (logs->parsed()) {
    const std::string query = rank > 0 ? "rank=" + std::to_string(rank) : "";
    if (!follow) {
      Reply r = api.Call("GET", "/v1/jobs/" + id + "/logs" + (query.empty() ? "" : "?" + query));
      if (r.status != 200) return Fail(r);
      std::cout << r.body;
      return 0;
    }
    std::string error;
    if (!api.Stream("/v1/jobs/" + id + "/logs?follow=true" + (query.empty() ? "" : "&" + query),
                    std::cout, &error)) {
      std::cerr << "error: " << error << "\n";
      return 1;
    }
    return 0;
  }
  return 2;
}

}  // namespace weft::cli
