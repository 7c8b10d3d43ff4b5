// Two weftd in active/standby on one PostgreSQL store (docs/deploy.md), through the real
// binaries, a throwaway PostgreSQL cluster and, where Slurm runs, a throwaway Slurm cluster:
//   - the standby redirects the REST API to the leader, and the CLI follows;
//   - the leader killed -9 while a gang trains on Slurm: the standby takes over, adopts the
//     learners by their Slurm job ids, and the job completes without a restart;
//   - a leader paused past its lease (SIGSTOP) is deposed: when it wakes it writes nothing and
//     exits, and the history shows no write of its epoch after the takeover.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "executor/slurm_cluster.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"
#include "store/pg_cluster.h"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::SlurmCluster;
using testing::WeftdProcess;

constexpr char kLease[] = "2";  // seconds

// A leader and a standby weftd on one PostgreSQL store; each test starts the pair.
class FailoverTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("failover");
    o.fashion_mnist = true;
    o.postgresql = true;
    o.start = false;
    return o;
  }
  void TearDown() override {
    standby_.reset();
    leader_.reset();
    WeftdTest::TearDown();
  }

  // Starts weftd `a` (it leads) and then `b` (it stands by) on the store and one data directory,
  // with `args` and `env` added.
  void StartPair(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    for (auto [w, name] : {std::pair{&leader_, "a"}, std::pair{&standby_, "b"}}) {
      std::vector<std::string> all = {"--name", name, "--lease-seconds", kLease};
      all.insert(all.end(), args.begin(), args.end());
      *w = MakeWeftd("data", all, env);
    }
    ASSERT_TRUE(leader_->Start()) << leader_->log();
    standby_->set_token(leader_->token());
    ASSERT_TRUE(standby_->Start()) << standby_->log();
  }

  std::string Submit(const std::string& manifest) {
    const std::string file = dir_ + "/job.yaml";
    std::ofstream(file) << manifest;
    auto submit = leader_->Cli({"submit", file});
    EXPECT_EQ(submit.exit_code, 0) << submit.output;
    return testing::SubmittedJobId(submit.output);
  }

  // Seconds until the standby answers GET /v1/jobs itself (200, not a redirect).
  double AwaitTakeover(double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    auto client = standby_->Client();
    client.set_connection_timeout(1, 0);
    while (true) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      auto r = client.Get("/v1/jobs");
      if ((r && r->status == 200) || s > timeout_s) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // True when no history entry of a lower leader epoch follows one of a higher epoch.
  bool NoWriteOfADeposedLeader() const {
    return pg_->Sql("weft", R"sql(
      DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM job_events e1 JOIN job_events e2 ON e1.job_id = e2.job_id
                   WHERE e1.leader_epoch < e2.leader_epoch AND e1.seq > e2.seq) THEN
          RAISE EXCEPTION 'a deposed leader wrote after the takeover';
        END IF;
      END $$)sql");
  }
  bool SomeEventAtEpoch(int epoch) const {
    return pg_->Sql("weft",
                    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM job_events WHERE "
                    "leader_epoch = " +
                        std::to_string(epoch) + ") THEN RAISE EXCEPTION 'none'; END IF; END $$");
  }

  std::unique_ptr<WeftdProcess> leader_, standby_;
};

TEST_F(FailoverTest, TheStandbyRedirectsTheApiToTheLeader) {
  StartPair({}, {});
  auto r = standby_->Client().Get("/v1/jobs?limit=5");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 307);
  EXPECT_EQ(r->get_header_value("Location"), leader_->url() + "/v1/jobs?limit=5");
  EXPECT_EQ(json::parse(r->body)["leader"], leader_->url());
  // Answered before the body is read: a standby buffers nothing (over 64 KiB would be a 413).
  auto big = standby_->Client().Post("/v1/jobs", std::string(256 << 10, 'x'), "application/yaml");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 307);
  auto health = standby_->Client().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["status"], "standby");
  // The CLI follows the redirect with its token: a write sent to the standby lands.
  const std::string file = dir_ + "/job.yaml";
  std::ofstream(file) << "name: via-standby\nmodel: {architecture: mlp, hidden_units: [16]}\n"
                         "data: {train_samples: 1000, test_samples: 500}\n"
                         "training: {epochs: 1, threads: 1}\nresources: {cpus: 1}\n";
  auto submit = standby_->Cli({"submit", file});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = testing::SubmittedJobId(submit.output);
  EXPECT_EQ(leader_->WaitForJob(id, {"COMPLETED", "FAILED"}, 120)["state"], "COMPLETED");
  EXPECT_THAT(standby_->log(), HasSubstr("standing by; the leader is a"));
  // What cannot follow a redirect goes to the leader the standby names: a log stream, an upload.
  auto logs = standby_->Cli({"logs", id, "--follow"});
  EXPECT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_THAT(logs.output, HasSubstr("finished"));
  auto upload = standby_->Cli({"artifact", "upload", file, "--name", "job.yaml"});
  EXPECT_EQ(upload.exit_code, 0) << upload.output;
  EXPECT_THAT(leader_->Cli({"artifact", "list"}).output, HasSubstr("job.yaml"));
}

// The issue's failover: kill -9 the leader while a gang trains on Slurm.
TEST_F(FailoverTest, OnSlurmTheStandbyTakesOverFromAKilledLeaderAndTheJobCompletesUnrestarted) {
  std::string why;
  slurm_ = SlurmCluster::Start(2, 1, &why);
  if (slurm_ == nullptr) GTEST_SKIP() << "no Slurm cluster here: " << why;
  // With slurm_ set, MakeWeftd runs both on it (--executor slurm, SLURM_CONF).
  StartPair({}, {});
  const std::string id = Submit(
      "name: gang\nmodel: {architecture: mlp, hidden_units: [128]}\n"
      "data: {train_samples: 12000, test_samples: 2000}\n"
      "training: {epochs: 8, threads: 1}\n"
      "resources: {cpus: 1, memory_mb: 1024, learners: 2, placement: spread}\n");
  ASSERT_EQ(leader_->WaitForJob(id, {"RUNNING"}, 90)["state"], "RUNNING") << leader_->log();
  leader_->Kill();
  const double takeover_s = AwaitTakeover(60);
  std::cout << "standby answered the API " << takeover_s << " s after the leader's kill\n";
  json done = standby_->WaitForJob(id, {"COMPLETED", "FAILED"}, 300);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << standby_->log();
  EXPECT_EQ(done["attempt"], 1) << "adopted by Slurm job id, never restarted";
  EXPECT_THAT(standby_->log(), HasSubstr("this weftd (b) leads, at epoch 2"));
  EXPECT_THAT(standby_->log(), HasSubstr("adopted learner"));
  EXPECT_TRUE(SomeEventAtEpoch(2));
  EXPECT_TRUE(NoWriteOfADeposedLeader());
}

// A leader that stalls (SIGSTOP) past its lease is deposed; when it runs again, its first
// renewal or write finds the new epoch, and it exits having changed nothing.
TEST_F(FailoverTest, ALeaderPausedPastItsLeaseIsDeposedAndWritesNothingWhenItWakes) {
  StartPair({}, {});
  // 150 epochs of this MLP train for about 20 s here (10 took 1.4 s, and the learner finished
  // while the leader was stopped: nothing was left to hand over).
  const std::string id = Submit(
      "name: long\nmodel: {architecture: mlp, hidden_units: [128]}\n"
      "data: {train_samples: 20000, test_samples: 2000}\n"
      "training: {epochs: 150, threads: 1}\nresources: {cpus: 1}\n");
  ASSERT_EQ(leader_->WaitForJob(id, {"RUNNING"}, 60)["state"], "RUNNING") << leader_->log();
  const std::vector<int64_t> pids = testing::LearnerPids(id);
  ASSERT_EQ(pids.size(), 1u);
  // The leader learns the standby's coordinator within a lease renewal (1 s) and the learner
  // from the next heartbeat answer (1 s): before that it knows no other weftd to turn to.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  kill(leader_->pid(), SIGSTOP);
  AwaitTakeover(60);
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the learner reports to b now
  kill(leader_->pid(), SIGCONT);
  for (int i = 0; i < 100 && leader_->Alive(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(leader_->Alive()) << "a deposed leader exits";
  EXPECT_THAT(leader_->log(), HasSubstr("no longer leads"));
  json done = standby_->WaitForJob(id, {"COMPLETED", "FAILED"}, 300);
  ASSERT_EQ(done["state"], "COMPLETED") << done.dump(2) << standby_->log();
  EXPECT_EQ(done["attempt"], 1);
  EXPECT_TRUE(SomeEventAtEpoch(2));
  EXPECT_TRUE(NoWriteOfADeposedLeader());
}

}  // namespace
}  // namespace weft
