// weft experiment submit, list, show, halt, resume, delete, best: hyperparameter searches
// (/v1/experiments; docs/manifest.md "Experiments").
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "common/files.h"

namespace weft::cli {
namespace {

struct Args {
  std::string file, id, out;
  bool follow = false, as_json = false, download = false, delivered = false;
};

// "0.8812", or "-" for a null or missing metric.
std::string Metric(const json& v) {
  return v.is_number() ? absl::StrFormat("%.4f", v.get<double>()) : std::string("-");
}

// "lr=0.01 batch=64": a trial's values, in the space's order.
std::string Values(const json& values) {
  std::vector<std::string> parts;
  for (const auto& [field, value] : values.items()) {
    parts.push_back(absl::StrCat(field, "=", value.get<std::string>()));
  }
  return absl::StrJoin(parts, " ");
}

// One line of where the search stands: trials started, results per rung, the best so far.
std::string StatusLine(const json& e) {
  std::vector<std::string> rungs;
  for (const auto& r : e["rungs"]) {
    rungs.push_back(absl::StrCat(r.value("results", 0), "@", r.value("epochs", 0), "ep"));
  }
  return absl::StrCat(e.value("state", ""), "  trials ", e["trials"].size(), "/",
                      e["searcher"].value("max_trials", 0), "  results ", absl::StrJoin(rungs, " "),
                      "  best ", Metric(e["best_metric"]),
                      e["best_job"].is_string() ? " (" + e.value("best_job", "") + ")" : "");
}

// Prints the experiment's line when it differs from `last`; once the experiment is not RUNNING,
// its end as well, and the exit code (1 for FAILED, 0 otherwise, Fail's for an error reply).
std::optional<int> ShowProgress(const Client& api, const std::string& id, std::string& last) {
  Reply r = api.Call("GET", "/v1/experiments/" + id);
  if (r.status != 200) return Fail(r);
  const json e = r.Json();
  if (std::string line = StatusLine(e); line != last) {
    std::cout << line << std::endl;
    last = line;
  }
  if (e.value("state", "") == "RUNNING") return std::nullopt;
  std::cout << e.value("state", "") << ": " << e.value("reason", "") << "\n";
  return e.value("state", "") == "FAILED" ? 1 : 0;
}

// Whether event `e` of GET /v1/events is a write of experiment `id` (or the stream's reset,
// after which any write may have been missed).
bool Concerns(const SseEvent& e, const std::string& id) {
  if (e.event == "reset") return true;
  if (e.event != "experiment" && e.event != "experiment_deleted") return false;
  const json data = json::parse(e.data, nullptr, false);
  return data.is_object() && data["experiment"].is_object() &&
         data["experiment"].value("id", "") == id;
}

// Prints the experiment's line each time it is written (a trial started, a result, a new best,
// a new state), read from the tenant's event stream (GET /v1/events), until it is not RUNNING.
// Reconnects while weftd restarts (up to 30 tries a second apart). Where the stream is refused
// (429: the tenant holds all of its --follow-streams-per-tenant) it reads the experiment every
// 2 s instead.
int Follow(const Client& api, const std::string& id) {
  std::string last;
  std::optional<int> done;
  for (int failures = 0;;) {
    Reply r = api.Events(
        "/v1/events",
        [&](const SseEvent& e) {
          if (Concerns(e, id)) done = ShowProgress(api, id, last);
          return !done;
        },
        [&] {  // open: whatever changed before now is in this read, after it on the stream
          done = ShowProgress(api, id, last);
          return !done;
        });
    if (done) return *done;
    if (r.status == 429) {
      while (!(done = ShowProgress(api, id, last)))
        std::this_thread::sleep_for(std::chrono::seconds(2));
      return *done;
    }
    if (r.status != 0 && r.status != 200) return Fail(r);
    if (r.status == 200) failures = 0;  // the stream ended (weftd stopping): open it again
    if (r.status == 0 && ++failures >= 30) return Fail(r);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Submit(const Client& api, const std::string& file, bool follow) {
  auto text = ReadFile(file);
  if (!text.ok()) {
    std::cerr << "error: cannot read manifest " << file << ": " << text.status().message() << "\n";
    return 2;
  }
  Reply r = api.Call("POST", "/v1/experiments", *text);
  if (r.status != 201) {
    if (r.status == 400) std::cerr << "experiment manifest " << file << " rejected\n";
    return Fail(r);
  }
  const std::string id = r.Json().value("id", "");
  std::cout << "experiment " << id << " submitted; its trials start within a second\n"
            << "  weft experiment show " << id << "\n";
  return follow ? Follow(api, id) : 0;
}

int List(const Client& api) {
  Reply r = api.Call("GET", "/v1/experiments");
  if (r.status != 200) return Fail(r);
  std::cout << absl::StrFormat("%-22s %-24s %-10s %-8s %-19s %s\n", "ID", "NAME", "STATE", "BEST",
                               "BEST JOB", "REASON");
  const json list = r.Json();  // kept: the loop reads into it
  for (const auto& e : list["experiments"]) {
    std::cout << absl::StrFormat(
        "%-22s %-24s %-10s %-8s %-19s %s\n", e.value("id", ""), e.value("name", ""),
        e.value("state", ""), Metric(e["best_metric"]),
        e["best_job"].is_string() ? e.value("best_job", "") : "-", e.value("reason", ""));
  }
  return 0;
}

int Show(const Client& api, const std::string& id, bool as_json) {
  Reply r = api.Call("GET", "/v1/experiments/" + id);
  if (r.status != 200) return Fail(r);
  const json e = r.Json();
  if (as_json) {
    std::cout << e.dump(2) << "\n";
    return 0;
  }
  const json& s = e["searcher"];
  std::cout << e.value("id", "") << "  " << e.value("name", "") << "  (tenant "
            << e.value("tenant", "") << ")\n"
            << "  state:    " << e.value("state", "") << " (" << e.value("reason", "") << ")\n"
            << "  searcher: " << s.value("name", "") << ", eta " << s.value("eta", 0) << ", epochs "
            << s.value("min_resource", 0) << ".." << s.value("max_resource", 0) << ", at most "
            << s.value("max_trials", 0) << " trials, " << s.value("max_concurrent_trials", 0)
            << " at once, seed " << s.value("seed", 0) << "\n"
            << "  metric:   " << e["metric"].value("name", "") << " ("
            << e["metric"].value("goal", "") << "); best " << Metric(e["best_metric"])
            << (e["best_job"].is_string() ? " by " + e.value("best_job", "") : "") << "\n";
  if (e["delivered_job"].is_string()) {
    std::cout << "  delivered: " << e.value("delivered_job", "") << " met the deliver target at "
              << e.value("deliver_met_at", "") << "\n";
  }
  std::cout << "  rungs:   ";
  for (const auto& rung : e["rungs"]) {
    std::cout << absl::StrFormat(" [%d epochs: %d results, %d promoted]", rung.value("epochs", 0),
                                 rung.value("results", 0), rung.value("promoted", 0));
  }
  std::cout << "\n\n"
            << absl::StrFormat("%-5s %-19s %-10s %-4s %-7s %-20s %s\n", "TRIAL", "JOB", "STATE",
                               "RUNG", "EPOCH", "RESULTS", "VALUES");
  for (const auto& t : e["trials"]) {
    std::vector<std::string> results;
    for (const auto& m : t["results"]) results.push_back(Metric(m));
    std::cout << absl::StrFormat(
        "%-5d %-19s %-10s %-4d %-7s %-20s %s\n", t.value("trial", 0),
        t["job"].is_string() ? t.value("job", "") : "(deleted)", t.value("state", "-"),
        t.value("rung", 0), absl::StrCat(t.value("epoch", 0), "/", t.value("epochs_total", 0)),
        results.empty() ? "-" : absl::StrJoin(results, " "), Values(t["values"]));
  }
  return 0;
}

// The best trial so far (or the delivered one) and, with `download`, its model.
int Best(const Client& api, const Args& a) {
  Reply r = api.Call("GET", "/v1/experiments/" + a.id);
  if (r.status != 200) return Fail(r);
  const json e = r.Json();
  const char* key = a.delivered ? "delivered_job" : "best_job";
  if (!e[key].is_string()) {
    std::cerr << "error: experiment " << a.id
              << (a.delivered ? " has delivered no model yet: no trial met targets.deliver"
                              : " has no result yet: no trial has ended its first rung")
              << " (state " << e.value("state", "") << ")\n";
    return 1;
  }
  const std::string job = e.value(key, "");
  for (const auto& t : e["trials"]) {
    if (t["job"] != job) continue;
    std::cout << (a.delivered ? "delivered" : "best") << " trial " << t.value("trial", 0) << ": "
              << job << " (" << Values(t["values"]) << "), " << e["metric"].value("name", "") << " "
              << Metric(a.delivered ? t["best_test_accuracy"] : e["best_metric"]) << "\n";
  }
  if (!a.download) return 0;
  std::string out =
      a.out.empty() ? absl::StrCat(a.id, a.delivered ? "-delivered" : "-best", ".pt") : a.out;
  return DownloadModel(api, job, a.delivered, out);
}

}  // namespace

void AddExperimentCommands(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<Args>();
  auto run = [&ctx, a](CLI::App* cmd, auto fn) {
    cmd->callback([&ctx, a, fn] { ctx.exit_code = fn(ctx.client(), *a); });
  };
  auto* experiment = app.add_subcommand(
      "experiment", "hyperparameter searches (ASHA, random, grid) whose trials are jobs");
  experiment->require_subcommand(1);
  auto with_id = [&](const char* name, const char* about) {
    CLI::App* cmd = experiment->add_subcommand(name, about);
    cmd->add_option("ID", a->id, "experiment id (exp-…)")->required();
    return cmd;
  };
  auto* submit = experiment->add_subcommand("submit", "submit an experiment manifest");
  submit->add_option("FILE", a->file, "manifest file (kind: Experiment)")->required();
  submit->add_flag("--follow,-f", a->follow, "print the search's progress until it ends");
  run(submit, [](const Client& c, const Args& x) { return Submit(c, x.file, x.follow); });
  run(experiment->add_subcommand("list", "list experiments"),
      [](const Client& c, const Args&) { return List(c); });
  auto* show = with_id("show", "show an experiment: its search, rungs and trials");
  show->add_flag("--json", a->as_json, "print the API's JSON");
  run(show, [](const Client& c, const Args& x) { return Show(c, x.id, x.as_json); });
  run(with_id("follow", "print an experiment's progress until it ends"),
      [](const Client& c, const Args& x) { return Follow(c, x.id); });
  auto* best = with_id("best", "the best trial so far (its job and values)");
  best->add_flag("--delivered", a->delivered,
                 "the trial whose model met targets.deliver first instead");
  best->add_flag("--download", a->download,
                 "download its model too (the best trial's final model, or the delivered one)");
  best->add_option("-o,--output", a->out, "output path (default ID-best.pt / ID-delivered.pt)");
  run(best, [](const Client& c, const Args& x) { return Best(c, x); });
  run(with_id("halt", "stop an experiment and its trials (it can be resumed)"),
      [](const Client& c, const Args& x) {
        return Act(c, "POST", "/v1/experiments/" + x.id + "/halt", "halted " + x.id);
      });
  run(with_id("resume", "go on with a halted experiment"), [](const Client& c, const Args& x) {
    return Act(c, "POST", "/v1/experiments/" + x.id + "/resume", "resumed " + x.id);
  });
  run(with_id("delete", "stop an experiment and remove it with its trials' jobs"),
      [](const Client& c, const Args& x) {
        return Act(c, "DELETE", "/v1/experiments/" + x.id, "deleted " + x.id);
      });
}

}  // namespace weft::cli
