// Issue 17's benchmarks, through the real binaries, a throwaway PostgreSQL cluster and a
// throwaway Slurm cluster of two logical nodes (the test suite's fixtures), one JSON line at the
// end:
//   1. Submit -> first learner running (the job RUNNING: its learner registered with weftd), the
//      local executor against the Slurm executor, the same one-learner job, alternating,
//      REPEATS each; medians.
//   2. Leader kill -> the standby answering writes: two weftd on PostgreSQL (--lease-seconds
//      default, 3), ROUNDS failovers back and forth; each round two jobs train and one waits
//      when the leader is killed -9, then the new leader is sent submits until one is answered
//      201. At the end every job acknowledged must have COMPLETED, none restarted (jobs lost,
//      goal 0), and the seconds from kill to a 201 (goal <= 5 s).
// Usage: bench_failover [REPEATS=5] [ROUNDS=3]. About 3 minutes.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "executor/slurm_cluster.h"
#include "integration/weftd_process.h"
#include "nlohmann/json.hpp"
#include "store/pg_cluster.h"

namespace {

using nlohmann::json;
using weft::testing::WeftdProcess;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// POSTs `manifest`; the job id when answered 201, else "".
std::string Submit(const WeftdProcess& w, const std::string& manifest) {
  auto client = w.Client();
  client.set_connection_timeout(0, 300'000);
  auto r = client.Post("/v1/jobs", manifest, "application/yaml");
  if (!r || r->status != 201) return "";
  return json::parse(r->body, nullptr, false).value("id", "");
}

// Polls the job every 10 ms until it is in `state` or `timeout_s` pass; its last JSON.
json AwaitState(const WeftdProcess& w, const std::string& id, const std::string& state,
                double timeout_s) {
  const auto start = Clock::now();
  json j;
  while (Seconds(start) < timeout_s) {
    auto r = w.Client().Get("/v1/jobs/" + id);
    if (r && r->status == 200) {
      j = json::parse(r->body, nullptr, false);
      if (j.is_object() && j.value("state", "") == state) return j;
      if (j.is_object() && (j.value("state", "") == "FAILED")) return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return j;
}

const char kSmallJob[] =
    "name: first-learner\nmodel: {architecture: mlp, hidden_units: [64]}\n"
    "data: {train_samples: 2000, test_samples: 500}\n"
    "training: {epochs: 1, threads: 1}\nresources: {cpus: 1, memory_mb: 1024}\n";

// Submit -> RUNNING on `w`, seconds; the job is then waited out. -1 if it never ran.
double FirstLearnerRunning(const WeftdProcess& w) {
  const auto start = Clock::now();
  const std::string id = Submit(w, kSmallJob);
  if (id.empty()) return -1;
  json j = AwaitState(w, id, "RUNNING", 120);
  const double s = j.value("state", "") == "RUNNING" ? Seconds(start) : -1;
  AwaitState(w, id, "COMPLETED", 300);
  return s;
}

struct StartupFigures {
  std::vector<double> local, slurm;
  std::string slurm_skipped;
};

StartupFigures MeasureStartup(const std::string& dir, int repeats) {
  StartupFigures f;
  WeftdProcess local(dir + "/local");
  if (!local.Start()) {
    std::cerr << local.log();
    std::exit(1);
  }
  auto slurm_cluster = weft::testing::SlurmCluster::Start(2, 1, &f.slurm_skipped);
  std::unique_ptr<WeftdProcess> slurm;
  if (slurm_cluster != nullptr) {
    slurm = std::make_unique<WeftdProcess>(dir + "/slurm");
    slurm->set_args({"--executor", "slurm"});
    slurm->set_env({"SLURM_CONF=" + slurm_cluster->conf()});
    if (!slurm->Start()) {
      std::cerr << slurm->log();
      std::exit(1);
    }
  }
  for (int i = 0; i < repeats; ++i) {
    f.local.push_back(FirstLearnerRunning(local));
    if (slurm) f.slurm.push_back(FirstLearnerRunning(*slurm));
    std::cout << "  repeat " << i + 1 << ": local " << f.local.back() << " s"
              << (slurm ? ", slurm " + std::to_string(f.slurm.back()) + " s" : "") << "\n"
              << std::flush;
  }
  return f;
}

const char kTrainingJob[] =
    "name: failover\nmodel: {architecture: mlp, hidden_units: [128]}\n"
    "data: {train_samples: 12000, test_samples: 2000}\n"
    "training: {epochs: 6, threads: 1}\nresources: {cpus: 1, memory_mb: 1024}\n";
const char kProbeJob[] =
    "name: probe\nmodel: {architecture: mlp, hidden_units: [16]}\n"
    "data: {train_samples: 500, test_samples: 500}\n"
    "training: {epochs: 1, threads: 1}\nresources: {cpus: 1, memory_mb: 512}\n";

struct FailoverFigures {
  std::vector<double> takeover_s;
  int acknowledged = 0, completed = 0, restarted = 0, lost = 0;
};

FailoverFigures MeasureFailover(const std::string& dir, int rounds) {
  FailoverFigures f;
  std::string why;
  auto pg = weft::testing::PgCluster::Start(&why);
  if (pg == nullptr) {
    std::cerr << "no PostgreSQL here: " << why << "\n";
    std::exit(1);
  }
  const std::string uri = pg->Database("weft");
  std::vector<std::unique_ptr<WeftdProcess>> pair;
  for (const char* name : {"a", "b"}) {
    pair.push_back(std::make_unique<WeftdProcess>(dir + "/pair"));
    pair.back()->set_args({"--store", uri, "--name", name});
    if (!pair[0]->token().empty()) pair.back()->set_token(pair[0]->token());
    if (!pair.back()->Start()) {
      std::cerr << pair.back()->log();
      std::exit(1);
    }
  }
  std::vector<std::string> jobs;
  int leader = 0;
  for (int r = 0; r < rounds; ++r) {
    WeftdProcess& old_leader = *pair[leader];
    WeftdProcess& standby = *pair[1 - leader];
    std::vector<std::string> round_jobs;
    for (int j = 0; j < 3; ++j) round_jobs.push_back(Submit(old_leader, kTrainingJob));
    for (int j = 0; j < 2; ++j) AwaitState(old_leader, round_jobs[j], "RUNNING", 60);
    old_leader.Kill();
    const auto killed = Clock::now();
    std::string probe;
    while (probe.empty() && Seconds(killed) < 60) {
      probe = Submit(standby, kProbeJob);
      if (probe.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    f.takeover_s.push_back(Seconds(killed));
    std::cout << "  round " << r + 1 << ": the standby answered a write " << f.takeover_s.back()
              << " s after the leader's kill\n"
              << std::flush;
    round_jobs.push_back(probe);
    jobs.insert(jobs.end(), round_jobs.begin(), round_jobs.end());
    if (!old_leader.Start()) std::cerr << "the old leader did not restart as a standby\n";
    leader = 1 - leader;
  }
  for (const std::string& id : jobs) {
    if (id.empty()) continue;
    ++f.acknowledged;
    json j = AwaitState(*pair[leader], id, "COMPLETED", 600);
    if (j.value("state", "") == "COMPLETED") ++f.completed;
    if (j.value("attempt", 1) > 1) {
      ++f.restarted;
      std::cout << "  job " << id << " restarted:";
      for (const auto& e : j["history"]) {
        std::cout << "\n    -> " << e.value("to", "") << ": " << e.value("reason", "");
      }
      std::cout << "\n";
    }
  }
  f.lost = f.acknowledged - f.completed;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  char tmpl[] = "/tmp/weft-bench-failover-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::cout << "submit -> first learner running, local vs Slurm executor, " << repeats
            << " alternating repeats:\n";
  StartupFigures startup = MeasureStartup(dir, repeats);
  std::cout << "leader kill -9 -> the standby answering writes, " << rounds << " rounds:\n";
  FailoverFigures failover = MeasureFailover(dir, rounds);
  const double local = Median(startup.local), slurm = Median(startup.slurm);
  const double takeover = Median(failover.takeover_s);
  const double worst = failover.takeover_s.empty() ? -1
                                                   : *std::max_element(failover.takeover_s.begin(),
                                                                       failover.takeover_s.end());
  std::cout << "first learner running: local " << local << " s, slurm "
            << (startup.slurm.empty() ? "skipped (" + startup.slurm_skipped + ")"
                                      : std::to_string(slurm) + " s")
            << "\nstandby answering writes: median " << takeover << " s, worst " << worst
            << " s (goal <= 5)\njobs acknowledged " << failover.acknowledged << ", completed "
            << failover.completed << ", restarted " << failover.restarted << ", lost "
            << failover.lost << " (goal 0)\n";
  json out = {{"bench", "failover"},
              {"first_learner_running_local_s", local},
              {"first_learner_running_slurm_s", startup.slurm.empty() ? json() : json(slurm)},
              {"slurm_over_local", startup.slurm.empty() ? json() : json(slurm / local)},
              {"takeover_median_s", takeover},
              {"takeover_worst_s", worst},
              {"jobs_acknowledged", failover.acknowledged},
              {"jobs_restarted", failover.restarted},
              {"jobs_lost", failover.lost}};
  std::cout << out.dump() << "\n";
  if (std::getenv("WEFT_BENCH_KEEP") == nullptr) {
    std::filesystem::remove_all(dir);
  } else {
    std::cout << "kept " << dir << "\n";
  }
  return 0;
}
