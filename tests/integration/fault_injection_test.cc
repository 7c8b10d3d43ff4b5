// Fault injection through the real binaries: a seeded sequence of trials, each running a job and
// killing (kill -9) its learner, weftd, or both at a random instant, then checking that the job
// still completes as an uninterrupted run would, that nothing acknowledged was lost and that no
// learner is left behind. WEFT_FAULT_TRIALS (default 10) and WEFT_FAULT_SEED (default 1) set the
// run; the long run is bench/fault_injection.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "integration/weftd_test.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"
#include "store/sqlite_store.h"

namespace weft {
namespace {

using nlohmann::json;
using testing::WeftdProcess;
using Clock = std::chrono::steady_clock;

constexpr char kManifest[] =
    "name: fault\nmodel: {architecture: mlp, hidden_units: [128]}\n"
    "data: {train_samples: 12000, test_samples: 2000}\n"
    "training: {epochs: 3, threads: 1, seed: 7}\nresources: {cpus: 1}\n"
    "checkpoint: {every_steps: 50, keep: 2}\nmax_restarts: 10\n";

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Each trial runs its own weftd (MakeWeftd) on a fresh data directory.
class FaultInjectionTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("faults");
    o.fashion_mnist = true;
    o.start = false;
    return o;
  }
  void SetUp() override {
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    manifest_ = Write("job.yaml", kManifest);
  }

  // The answer's JSON object; an empty object when weftd does not answer 200 with one (so a
  // dead weftd fails the checks below with its log, not with a type error).
  json Get(const WeftdProcess& w, const std::string& path) {
    httplib::Client c = w.Client();
    c.set_connection_timeout(1, 0);
    auto r = c.Get(path);
    if (!r || r->status != 200) return json::object();
    json j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j : json::object();
  }

  std::string manifest_;
};

TEST_F(FaultInjectionTest, JobsSurviveKillsOfLearnerAndWeftdAtRandomInstants) {
  const int trials = EnvInt("WEFT_FAULT_TRIALS", 10);
  const int seed = EnvInt("WEFT_FAULT_SEED", 1);
  std::mt19937 rng(seed);

  // The uninterrupted run every trial is compared to.
  // Its length sets the window the random kills fall in, so they land mid-run on a fast
  // machine as on a slow one.
  double baseline = 0;
  int baseline_ms = 0;
  {
    auto w = MakeWeftd("baseline");
    ASSERT_TRUE(w->Start()) << w->log();
    std::string id = w->Submit(manifest_);
    w->WaitForJob(id, {"RUNNING", "COMPLETED", "FAILED"}, 60);
    Clock::time_point running = Clock::now();
    json j = w->WaitForJob(id, {"COMPLETED", "FAILED"}, 120);
    ASSERT_EQ(j.value("state", ""), "COMPLETED") << j.dump(2);
    baseline = j["models"]["final"]["test_accuracy"].get<double>();
    baseline_ms = static_cast<int>(1000 * Seconds(running, Clock::now()));
  }
  const int kill_window_ms = std::max(300, baseline_ms * 8 / 10);

  int passed = 0, learner_kills = 0, weftd_kills = 0, too_late = 0;
  int failpoint_trials[3] = {0, 0, 0};  // atomic write, checkpoint commit, weftd transition
  std::vector<double> checkpoint_bytes, checkpoint_ms, interval_s;
  std::vector<double> learner_recovery_s, api_recovery_s;
  for (int t = 0; t < trials; ++t) {
    SCOPED_TRACE("trial " + std::to_string(t) + " (seed " + std::to_string(seed) + ")");
    const int failed_before =
        ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    // 0: kill -9 the learner, 1: weftd, 2: both, at a random instant of the run; at a failpoint
    // (common/failpoint.h): 3: the learner mid atomic write (temp file written, not renamed),
    // 4: the learner between a checkpoint's write and its commit, 5: weftd right after storing
    // a state transition.
    int target = std::uniform_int_distribution<int>(0, 5)(rng);
    int hit = std::uniform_int_distribution<int>(1, 3)(rng);
    const std::string data = dir_ + "/trial-" + std::to_string(t);
    auto w = MakeWeftd("trial-" + std::to_string(t));
    // Every learner audits the samples of its applied steps: the check at the end proves the
    // kills lost and repeated no sample.
    const std::string audit = "WEFT_LEARNER_AUDIT=1";
    w->set_env({audit});
    if (target == 3)
      w->set_env(
          {audit, "WEFT_LEARNER_FAILPOINT=atomic-write-before-rename@" + std::to_string(hit)});
    if (target == 4)
      w->set_env({audit, "WEFT_LEARNER_FAILPOINT=checkpoint-before-commit@" + std::to_string(hit)});
    if (target == 5) w->set_env({audit, "WEFT_FAILPOINT=after-transition@" + std::to_string(hit)});
    ASSERT_TRUE(w->Start()) << w->log();
    std::string id = w->Submit(manifest_);
    ASSERT_FALSE(id.empty());
    if (target >= 3) ++failpoint_trials[target - 3];
    if (target == 5) {
      // weftd dies at its hit-th transition of the job; a clean weftd takes over.
      for (int i = 0; i < 300 && w->Alive(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      ASSERT_FALSE(w->Alive()) << "weftd did not reach after-transition@" << hit;
      w->set_env({audit});
      Clock::time_point restart = Clock::now();
      ASSERT_TRUE(w->Start()) << w->log();
      api_recovery_s.push_back(Seconds(restart, Clock::now()));
    }
    json running = w->WaitForJob(id, {"RUNNING", "COMPLETED"}, 60);
    ASSERT_TRUE(running.value("state", "") == "RUNNING" ||
                running.value("state", "") == "COMPLETED")
        << running.dump(2) << w->log();

    int delay_ms = std::uniform_int_distribution<int>(100, kill_window_ms)(rng);
    if (target <= 2) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    json before = Get(*w, "/v1/jobs/" + id);
    if (target <= 2 && (before.empty() || before.value("state", "") == "COMPLETED")) {
      // Too late to hurt it; still a trial of the checks below.
      target = -1;
      ++too_late;
    }
    Clock::time_point killed_at = Clock::now();
    if (target == 0 || target == 2) {
      for (int64_t pid : testing::LearnerPids(id)) kill(static_cast<pid_t>(pid), SIGKILL);
      ++learner_kills;
    }
    if (target == 1 || target == 2) {
      w->Kill();
      ++weftd_kills;
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng)));
      Clock::time_point restart = Clock::now();
      ASSERT_TRUE(w->Start()) << w->log();
      api_recovery_s.push_back(Seconds(restart, Clock::now()));
    }
    if (target == 0) {
      // Learner death -> a new learner registered and training again.
      json again = w->WaitForJob(id, {"RUNNING", "DELIVERED", "COMPLETED"}, 60);
      for (int i = 0; i < 200 && again.value("attempt", 0) < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        again = Get(*w, "/v1/jobs/" + id);
      }
      if (again.value("attempt", 0) >= 2)
        learner_recovery_s.push_back(Seconds(killed_at, Clock::now()));
    }

    json done = w->WaitForJob(id, {"COMPLETED", "FAILED"}, 180);
    if (target == 3 || target == 4) {
      // The learner's failpoint fired: it crashed once and was restarted.
      EXPECT_GE(done.value("attempt", 0), 2) << "the learner failpoint never fired";
    }
    ASSERT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2) << w->log();
    double acc = done["models"]["final"]["test_accuracy"].get<double>();
    EXPECT_NEAR(acc, baseline, 0.01) << "final accuracy vs the uninterrupted run";

    // Nothing acknowledged is missing: models and checkpoints on disk with their sizes,
    // a gapless history, every attempt's start in the log.
    for (const auto& [kind, m] : done["models"].items()) {
      EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(m["path"].get<std::string>())),
                m["bytes"].get<int64_t>())
          << kind;
    }
    int seq = 0;
    for (const auto& e : done["history"]) EXPECT_EQ(e["seq"].get<int>(), ++seq);
    // Every sample of each of the 3 epochs trained by exactly one step of the model's lineage.
    auto audited = w->Cli({"audit", id});
    EXPECT_EQ(audited.exit_code, 0) << audited.output;
    EXPECT_NE(audited.output.find("epoch 3: 12000 samples, 12000 once, 0 missing, 0 twice"),
              std::string::npos)
        << audited.output;
    std::string log = w->Cli({"logs", id}).output;
    // Every attempt that reached RUNNING has its start in the log (an attempt weftd recorded but
    // crashed before launching never ran, and has no log).
    std::set<int> ran;
    int current = 0;
    std::regex starting(R"(starting learner, attempt (\d+))");
    for (const auto& e : done["history"]) {
      std::smatch m;
      std::string reason = e.value("reason", "");
      if (std::regex_search(reason, m, starting)) current = std::stoi(m[1]);
      if (e.value("to", "") == "RUNNING" && current > 0) ran.insert(current);
    }
    EXPECT_FALSE(ran.empty());
    for (int a : ran) {
      EXPECT_NE(log.find("attempt " + std::to_string(a) + " pid"), std::string::npos)
          << "attempt " << a << " missing from the log";
    }
    // Steps lost: every resume starts from one of the two newest checkpoints written before it
    // (the newest unless the kill fell between its write and its commit), so a failure costs at
    // most the steps since that checkpoint: one interval (50 steps), two in that corner case.
    std::regex written(R"(checkpoint written: \S+ \(step (\d+), (\d+) bytes, (\d+) ms\))");
    std::regex resumed(R"(resumed from \S+: epoch \d+, step (\d+))");
    std::regex start(R"(attempt (\d+) pid)");
    std::regex stamp(R"(^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) )");
    auto seconds_of = [&](const std::string& line) -> double {
      std::smatch m;
      if (!std::regex_search(line, m, stamp)) return -1;
      std::tm tm{};
      strptime(m[1].str().c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
      return static_cast<double>(timegm(&tm)) + std::stod(m[1].str().substr(19));
    };
    int64_t last_written = -1, prev_written = -1;
    std::map<int64_t, double> written_at;  // step -> when its checkpoint was written
    double last_line_at = -1, current_attempt_after = -1;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      double at = seconds_of(line);
      if (std::regex_search(line, m, start)) current_attempt_after = last_line_at;
      if (at >= 0) last_line_at = at;
      if (std::regex_search(line, m, written)) {
        // Seconds between consecutive checkpoints of one attempt: a failure loses at most one
        // such interval of work (two in the write-but-not-committed corner).
        if (last_written >= 0 && std::stoll(m[1]) > last_written &&
            written_at.count(last_written) && written_at[last_written] > current_attempt_after) {
          interval_s.push_back(at - written_at[last_written]);
        }
        prev_written = last_written;
        last_written = std::stoll(m[1]);
        written_at[last_written] = at;
        checkpoint_bytes.push_back(std::stod(m[2]));
        checkpoint_ms.push_back(std::stod(m[3]));
      } else if (std::regex_search(line, m, resumed)) {
        int64_t step = std::stoll(m[1]);
        EXPECT_TRUE(step == last_written || step == prev_written)
            << "resumed from step " << step << ", newest checkpoints " << last_written << ", "
            << prev_written;
      }
    }

    // No learner left behind; the store opens clean.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(testing::LearnerPids(id).empty()) << "orphan learner";
    w->Stop();
    auto store = SqliteStore::Open(data + "/weft.db");
    ASSERT_TRUE(store.ok()) << store.status();
    auto job = (*store)->GetJob(id);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state, JobState::kCompleted);
    // This trial passed if it added no failed assertion.
    const auto* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
    bool trial_failed = false;
    for (int k = failed_before; k < result->total_part_count(); ++k) {
      trial_failed = trial_failed || result->GetTestPartResult(k).failed();
    }
    if (!trial_failed) ++passed;
    std::filesystem::remove_all(data);
  }

  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / v.size();
  };
  std::printf(
      "{\"bench\": \"fault_injection\", \"seed\": %d, \"trials\": %d, \"passed\": %d, "
      "\"learner_kills\": %d, \"weftd_kills\": %d, \"kills_after_completion\": %d, "
      "\"baseline_run_s\": %.1f, \"learner_crash_mid_atomic_write\": %d, "
      "\"learner_crash_before_checkpoint_commit\": %d, \"weftd_crash_after_transition\": %d, "
      "\"baseline_accuracy\": %.4f, \"learner_recovery_s_mean\": %.2f, "
      "\"weftd_api_recovery_s_mean\": %.2f, \"checkpoint_interval_steps\": 50, "
      "\"checkpoint_interval_s_mean\": %.2f, \"checkpoint_bytes_mean\": %.0f, "
      "\"checkpoint_ms_mean\": %.1f, \"checkpoints\": %zu}\n",
      seed, trials, passed, learner_kills, weftd_kills, too_late, baseline_ms / 1000.0,
      failpoint_trials[0], failpoint_trials[1], failpoint_trials[2], baseline,
      mean(learner_recovery_s), mean(api_recovery_s), mean(interval_s), mean(checkpoint_bytes),
      mean(checkpoint_ms), checkpoint_bytes.size());
  EXPECT_EQ(passed, trials);
}

}  // namespace
}  // namespace weft
