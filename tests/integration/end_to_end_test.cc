// End to end through the real binaries: weftd on a temporary directory and a free port, the weft
// CLI, weft-learner training with libtorch on the real Fashion-MNIST data.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "integration/weftd_test.h"
#include "job/job_spec.h"
#include "nlohmann/json.hpp"
#include "train/training_loop.h"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kSmoke = std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-mlp-smoke.yaml";

class EndToEndTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("e2e");
    o.fashion_mnist = true;
    return o;
  }

  httplib::Client Http() const { return weftd_->Client(); }

  json GetJson(const std::string& path, int expect_status = 200) {
    auto c = Http();
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, expect_status) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  static std::string JobIdFrom(const std::string& output) {
    return testing::SubmittedJobId(output);
  }
};

TEST_F(EndToEndTest, SmokeJobCompletesWithModelsLogsMetricsAndSurvivesRestart) {
  auto submit = weftd_->Cli({"submit", kSmoke, "--follow"}, 240);
  ASSERT_EQ(submit.exit_code, 0) << submit.output << weftd_->log();
  EXPECT_THAT(submit.output, HasSubstr("COMPLETED"));
  std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;

  json job = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(job["state"], "COMPLETED");
  EXPECT_EQ(job["tenant"], "default");
  double acc = job["metrics"].value("test_accuracy", 0.0);
  EXPECT_GE(acc, 0.75) << job.dump(2);
  EXPECT_EQ(job["progress"]["epoch"], 1);
  EXPECT_TRUE(job["targets"]["deliver"]["met"].get<bool>());
  EXPECT_FALSE(job["targets"]["complete"]["met"].get<bool>());
  EXPECT_THAT(job.value("reason", ""), HasSubstr("budget exhausted, best"));
  std::vector<std::string> states;
  for (const auto& e : job["history"]) states.push_back(e["to"]);
  EXPECT_EQ(states, (std::vector<std::string>{"QUEUED", "PLACED", "STARTING", "RUNNING",
                                              "DELIVERED", "COMPLETED"}));

  // Logs and metrics.
  auto logs = weftd_->Cli({"logs", id});
  EXPECT_EQ(logs.exit_code, 0);
  EXPECT_THAT(logs.output, HasSubstr("evaluation: epoch 1"));
  auto follow = weftd_->Cli({"logs", id, "-f"}, 30);  // ended job: streams and returns
  EXPECT_EQ(follow.exit_code, 0);
  EXPECT_EQ(follow.output, logs.output);
  json metrics = GetJson("/v1/jobs/" + id + "/metrics");
  int evals = 0, train_points = 0;
  for (const auto& p : metrics["points"]) {
    if (p.contains("test_accuracy")) ++evals;
    if (p.contains("train_loss")) {
      ++train_points;
      EXPECT_GT(p["samples_per_s"].get<double>(), 0);
    }
  }
  EXPECT_EQ(evals, 2) << "eval_every_steps 100 and the epoch end";
  EXPECT_GE(train_points, 1);
  // The series in pages: walked from the first point, they are the whole series in order.
  const int64_t total = metrics["total"].get<int64_t>();
  ASSERT_EQ(total, static_cast<int64_t>(metrics["points"].size()));
  json walked = json::array();
  for (int64_t from = 0, pages = 0; pages < 100; ++pages) {
    json page = GetJson("/v1/jobs/" + id + "/metrics?limit=2&from=" + std::to_string(from));
    EXPECT_EQ(page["from"].get<int64_t>(), from);
    for (const auto& p : page["points"]) walked.push_back(p);
    if (!page.contains("next")) break;
    from = page["next"].get<int64_t>();
  }
  EXPECT_EQ(walked, metrics["points"]);
  GetJson("/v1/jobs/" + id + "/metrics?limit=0", 400);
  GetJson("/v1/jobs/" + id + "/metrics?limit=10001", 400);
  GetJson("/v1/jobs/" + id + "/metrics?from=-1", 400);

  // Both models download and load in libtorch, with the accuracy weft reported.
  auto spec = ParseManifest(job["spec"].dump());
  ASSERT_TRUE(spec.ok());
  for (const std::string kind : {"delivered", "final"}) {
    std::string out = dir_ + "/" + kind + ".pt";
    auto dl = weftd_->Cli({"download", id, "--" + kind, "-o", out});
    ASSERT_EQ(dl.exit_code, 0) << dl.output;
    auto got = train::EvaluateSavedModel(out, kDefaultDataPath, spec->data.test_samples);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, job["models"][kind]["test_accuracy"].get<double>(), 1e-4) << kind;
    EXPECT_GE(*got, kind == "final" ? 0.75 : 0.70);
  }

  // Everything weftd and the learner wrote (store, secrets, spec, logs, checkpoints, models and
  // the directories) is its owner's alone: other users of a shared host read none of it.
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ + "/data")) {
    ++files;
    EXPECT_EQ(e.symlink_status().permissions() & (fs::perms::group_all | fs::perms::others_all),
              fs::perms::none)
        << e.path() << " is readable by others";
  }
  EXPECT_GE(files, 10);

  // Restart weftd on the same directory: the job and its whole history are still there.
  size_t history = job["history"].size();
  weftd_->Stop();
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json again = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(again["state"], "COMPLETED");
  EXPECT_EQ(again["history"].size(), history);
  EXPECT_EQ(again["history"], job["history"]);
  auto list = weftd_->Cli({"list"});
  EXPECT_THAT(list.output, HasSubstr(id));
}

TEST_F(EndToEndTest, BadManifestIsRejectedWithTheFieldAndNothingIsStored) {
  std::string bad = dir_ + "/bad.yaml";
  std::ofstream(bad) << "name: bad\nmodel: {architecture: cnn}\n"
                        "training: {epochs: 1, batch_size: -3}\n";
  auto r = weftd_->Cli({"submit", bad});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("training.batch_size: must be a positive integer, got '-3'"));
  EXPECT_TRUE(GetJson("/v1/jobs")["jobs"].empty());

  auto c = Http();
  auto res = c.Post("/v1/jobs",
                    "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\n"
                    "resources: {cpus: 512}\n",
                    "application/yaml");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  json err = json::parse(res->body);
  EXPECT_EQ(err["error"]["details"][0]["field"], "resources");
  EXPECT_THAT(err["error"]["details"][0]["problem"].get<std::string>(), HasSubstr("never fits"));
  EXPECT_TRUE(GetJson("/v1/jobs")["jobs"].empty());
}

// weft submit --set FIELD=VALUE changes the manifest before it is sent; weftd validates the
// result like any manifest, naming the field.
TEST_F(EndToEndTest, SubmitSetOverridesFieldsAndIsValidatedLikeTheManifest) {
  auto r = weftd_->Cli({"submit", kSmoke, "--set", "training.batch_size=-3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("training.batch_size: must be a positive integer, got '-3'"));
  r = weftd_->Cli({"submit", kSmoke, "--set", "name.first=x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--set name.first=x: name is not a mapping"));
  r = weftd_->Cli({"submit", kSmoke, "--set", "training..epochs=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("a field name is empty"));
  EXPECT_TRUE(GetJson("/v1/jobs")["jobs"].empty()) << "nothing refused was stored";

  r = weftd_->Cli({"submit", kSmoke, "--set", "name=renamed-by-set", "--set",
                   "training.learning_rate=3e-4", "--set", "model.hidden_units=[32, 16]"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string id = JobIdFrom(r.output);
  json job = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(job["name"], "renamed-by-set");
  EXPECT_DOUBLE_EQ(job["spec"]["training"]["learning_rate"].get<double>(), 3e-4);
  EXPECT_EQ(job["spec"]["model"]["hidden_units"], json::array({32, 16}));
  EXPECT_EQ(job["spec"]["data"]["train_samples"], 12000) << "what --set left alone stays";
  EXPECT_EQ(weftd_->Cli({"delete", id}).exit_code, 0);
}

TEST_F(EndToEndTest, ErrorsAreJsonWithTheRightStatus) {
  json missing = GetJson("/v1/jobs/job-nope", 404);
  EXPECT_THAT(missing["error"]["message"].get<std::string>(), HasSubstr("job-nope"));
  GetJson("/v1/jobs/job-nope/metrics", 404);
  GetJson("/v1/jobs/job-nope/logs", 404);
  GetJson("/v1/nothing-here", 404);
  auto c = Http();
  auto put = c.Put("/v1/jobs", "", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->get_header_value("Allow"), "GET, POST");
  EXPECT_EQ(json::parse(put->body)["error"]["code"], "method_not_allowed");
  auto get_halt = c.Get("/v1/jobs/job-nope/halt");
  ASSERT_TRUE(get_halt);
  EXPECT_EQ(get_halt->status, 405);
  auto empty = c.Post("/v1/jobs", "", "application/yaml");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 400);
  EXPECT_EQ(GetJson("/healthz")["status"], "ok");
}

TEST_F(EndToEndTest, HaltStopsTheLearnerResumeRequeuesAndDeleteRemovesEverything) {
  std::string long_job = dir_ + "/long.yaml";
  std::ofstream(long_job) << "name: long\nmodel: {architecture: mlp}\n"
                             "data: {train_samples: 6000, test_samples: 500}\n"
                             "training: {epochs: 500, threads: 1}\nresources: {cpus: 1}\n";
  auto submit = weftd_->Cli({"submit", long_job});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  std::string id = JobIdFrom(submit.output);
  json running = WaitFor(id, {"RUNNING"}, 60);
  ASSERT_EQ(running["state"], "RUNNING");

  auto halt = weftd_->Cli({"halt", id});
  EXPECT_EQ(halt.exit_code, 0) << halt.output;
  json halted = GetJson("/v1/jobs/" + id);
  EXPECT_EQ(halted["state"], "HALTED");
  EXPECT_EQ(halted["reason"], "halted by user");
  // Halting twice is a conflict, not a crash.
  auto again = weftd_->Cli({"halt", id});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.output, HasSubstr("already HALTED"));

  auto resume = weftd_->Cli({"resume", id});
  EXPECT_EQ(resume.exit_code, 0) << resume.output;
  json resumed = WaitFor(id, {"RUNNING"}, 60);
  EXPECT_EQ(resumed["attempt"], 2);
  // The halted learner checkpointed on its way out; the resumed one continues from there.
  for (int i = 0;
       i < 100 && weftd_->Cli({"logs", id}).output.find("resumed from") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(weftd_->Cli({"logs", id}).output, HasSubstr("resumed from"));

  std::string job_dir = dir_ + "/data/jobs/" + id;
  ASSERT_TRUE(std::filesystem::exists(job_dir));
  auto del = weftd_->Cli({"delete", id});
  EXPECT_EQ(del.exit_code, 0) << del.output;
  GetJson("/v1/jobs/" + id, 404);
  EXPECT_FALSE(std::filesystem::exists(job_dir));
  // No learner of the job is left running.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(testing::LearnerPids(id).empty()) << "a learner of the deleted job is still running";
}

// kill -9 of the learner mid-training: weft restarts it from its latest checkpoint and the job
// still completes with the accuracy an uninterrupted run reaches.
TEST_F(EndToEndTest, KilledLearnerRestartsFromItsCheckpointAndCompletes) {
  std::string file = dir_ + "/ckpt.yaml";
  std::ofstream(file) << "name: ckpt\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                         "data: {train_samples: 12000, test_samples: 2000}\n"
                         "training: {epochs: 12, threads: 1}\nresources: {cpus: 1}\n"
                         "checkpoint: {every_steps: 100, keep: 2}\n";
  auto submit = weftd_->Cli({"submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  std::string id = JobIdFrom(submit.output);
  WaitFor(id, {"RUNNING"}, 60);
  // Wait for a committed checkpoint, then kill the learner.
  json job;
  std::string ckpt_dir = dir_ + "/data/jobs/" + id + "/checkpoints";
  for (int i = 0; i < 300; ++i) {
    job = GetJson("/v1/jobs/" + id);
    if (job["progress"].value("step", 0) >= 250) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(job["progress"].value("step", 0), 100) << job.dump(2);
  std::vector<int64_t> pids = testing::LearnerPids(id);
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(kill(static_cast<pid_t>(pids[0]), SIGKILL), 0);

  json done = WaitFor(id, {"COMPLETED", "FAILED"}, 240);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2);
  EXPECT_EQ(done["attempt"], 2);
  bool restart_recorded = false;
  for (const auto& e : done["history"]) {
    std::string reason = e.value("reason", "");
    if (reason.find("killed by signal 9") != std::string::npos &&
        reason.find("restart 1 of 3 from the checkpoint at step") != std::string::npos) {
      restart_recorded = true;
    }
  }
  EXPECT_TRUE(restart_recorded) << done["history"].dump(2);
  std::string logs = weftd_->Cli({"logs", id}).output;
  EXPECT_THAT(logs, HasSubstr("resumed from"));
  EXPECT_GE(done["models"]["final"]["test_accuracy"].get<double>(), 0.78);
  // Only `keep` checkpoints stay on disk.
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(ckpt_dir)) files += f.is_regular_file();
  EXPECT_LE(files, 2);
}

// kill -9 of weftd mid-training: the learner keeps training, buffers its metrics, and the next
// weftd on the same directory adopts it (same attempt, no second copy) and sees the job finish.
TEST_F(EndToEndTest, LearnerOutlivesAKilledWeftdAndIsAdopted) {
  std::string file = dir_ + "/adopt.yaml";
  std::ofstream(file) << "name: adopt\nmodel: {architecture: mlp, hidden_units: [128]}\n"
                         "data: {train_samples: 12000, test_samples: 2000}\n"
                         "training: {epochs: 20, threads: 1}\nresources: {cpus: 1}\n";
  auto submit = weftd_->Cli({"submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  std::string id = JobIdFrom(submit.output);
  json running = WaitFor(id, {"RUNNING"}, 60);
  ASSERT_EQ(running["state"], "RUNNING");
  weftd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the learner trains on, alone
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json done = WaitFor(id, {"COMPLETED", "FAILED"}, 240);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_EQ(done["attempt"], 1) << "adopted, never restarted";
  for (const auto& e : done["history"]) {
    if (e["seq"].get<int>() > 1) {
      EXPECT_NE(e["to"], "QUEUED") << done["history"].dump(2);
    }
  }
  EXPECT_THAT(weftd_->log(), HasSubstr("adopted learner"));
  EXPECT_EQ(done["progress"]["epoch"], 20);
  // Metrics buffered while weftd was down arrived: training points cover every epoch.
  json metrics = GetJson("/v1/jobs/" + id + "/metrics");
  std::set<int> epochs;
  for (const auto& p : metrics["points"]) epochs.insert(p["epoch"].get<int>());
  EXPECT_EQ(epochs.size(), 20u);
}

}  // namespace
}  // namespace weft
