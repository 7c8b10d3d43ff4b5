// Elastic jobs whose membership changes race something else (issue 14): a checkpoint and a halt,
// a weftd that is down when the learner is lost. Whatever wins, no learner that survives is
// restarted without need, and every sample of every epoch is trained exactly once on the lineage.
#include <signal.h>

#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/gang_fixture.h"
#include "integration/weftd_process.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using testing::ElasticGangTest;
using ::testing::HasSubstr;

// A learner is lost while the job checkpoints every 5 steps (a checkpoint is under way or just
// committed whenever the survivors re-form), and the job is halted at once, while they re-form.
// The halt wins: the job stops with a committed checkpoint, resumes from it, and the audit still
// finds every epoch exact.
TEST_F(ElasticGangTest, ALossRacingACheckpointAndAHaltResumesWithEveryEpochExact) {
  std::map<int, int64_t> first;
  const std::string id = StartElastic(30, 60, "checkpoint: {every_steps: 5, keep: 2}\n", &first);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(::kill(static_cast<pid_t>(first.at(1)), SIGKILL), 0);
  // Halted as soon as weftd has moved the job to generation 2: the survivors are re-forming and
  // a newcomer is starting to grow it back.
  WaitUntil(
      id, [](const json& j) { return j.value("generation", 0) >= 2; }, 60, "generation 2");
  auto halt = weftd_->Cli({"halt", id});
  ASSERT_EQ(halt.exit_code, 0) << halt.output;
  json halted = WaitFor(id, {"HALTED"}, 120);
  EXPECT_EQ(halted["attempt"], 1) << History(halted);
  EXPECT_EQ(PidsById(halted).size(), 0u) << "no learner is left running: " << halted.dump(2);
  const int64_t halted_at = halted["progress"].value("step", 0);

  auto resume = weftd_->Cli({"resume", id});
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 2) << History(done);

  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 30 * 12000) << done.dump(2);
  // Rank 0 (learner 0 in both attempts) resumed from the last checkpoint the first attempt wrote.
  const std::string log0 = Log(id, 0);
  const size_t second = log0.find("resumed from");
  ASSERT_NE(second, std::string::npos) << log0;
  auto written = Matches(log0.substr(0, second), "checkpoint written: \\S+ \\(step (\\d+)");
  auto resumed = Matches(log0, "resumed from \\S+: epoch \\d+, step (\\d+)");
  ASSERT_FALSE(written.empty()) << log0;
  ASSERT_EQ(resumed.size(), 1u) << log0;
  EXPECT_EQ(resumed[0], written.back());
  EXPECT_GE(std::stoll(resumed[0]), halted_at);
  EXPECT_GT(done["models"]["final"]["test_accuracy"].get<double>(), 0.80);
  ExpectExactAudit(id, 30);
}

// weftd is down when a learner is lost: the survivors' collective fails and they keep asking to
// regroup; the next weftd adopts them, finds the learner gone, and moves the job to a new
// generation in place — no survivor restarted — and grows it back.
TEST_F(ElasticGangTest, ALearnerLostWhileWeftdIsDownIsHandledInPlaceByTheNextWeftd) {
  std::map<int, int64_t> first;
  const std::string id = StartElastic(40, 60, "", &first);
  ASSERT_EQ(first.size(), 3u);
  weftd_->Kill();
  ASSERT_EQ(::kill(static_cast<pid_t>(first.at(1)), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  WaitForLog(id, 0, "generation 2: rank 0 of 2, training on from step", 120);
  json j = Get("/v1/jobs/" + id);
  const std::map<int, int64_t> after = PidsById(j);
  EXPECT_EQ(after.count(1), 0u) << "learner 1 is gone";
  EXPECT_EQ(after.at(0), first.at(0)) << "learner 0 was not restarted";
  EXPECT_EQ(after.at(2), first.at(2)) << "learner 2 was not restarted";

  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << History(done);
  EXPECT_THAT(History(done), HasSubstr("generation 2: learner 1 "));
  EXPECT_THAT(History(done), HasSubstr("2 learners go on without a restart"));
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 40 * 12000) << done.dump(2);
  ExpectExactAudit(id, 40);
}

// A learner that hangs (SIGSTOP: alive but silent) is lost like a killed one: after the heartbeat
// timeout weftd kills it, the others go on in place, and the job grows back.
TEST_F(ElasticGangTest, AHungLearnerIsKilledAndTheOthersGoOnInPlace) {
  weftd_->Stop();
  weftd_->set_args({"--config", dir_ + "/nodes.yaml", "--heartbeat-timeout-seconds", "5"});
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  std::map<int, int64_t> first;
  const std::string id = StartElastic(40, 60, "", &first);
  ASSERT_EQ(first.size(), 3u);
  // The learner process itself hangs (in a container, the engine's process above it does not).
  const std::vector<int64_t> hung = testing::LearnerPids(id, 1);
  ASSERT_FALSE(hung.empty());
  for (int64_t pid : hung) ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGSTOP), 0);
  WaitForLog(id, 0, "generation 2: rank 0 of 2, training on from step", 60);
  const std::map<int, int64_t> after = PidsById(Get("/v1/jobs/" + id));
  EXPECT_EQ(after.count(1), 0u) << "learner 1 is gone";
  EXPECT_EQ(after.at(0), first.at(0)) << "learner 0 was not restarted";
  EXPECT_EQ(after.at(2), first.at(2)) << "learner 2 was not restarted";
  EXPECT_NE(::kill(static_cast<pid_t>(first.at(1)), 0), 0) << "the hung learner was killed";
  for (int64_t pid : hung) EXPECT_NE(::kill(static_cast<pid_t>(pid), 0), 0) << "pid " << pid;

  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << History(done);
  EXPECT_THAT(History(done), HasSubstr("generation 2: learner 1 killed by signal 9 (SIGKILL): "
                                       "stopped heartbeating (silent "));
  EXPECT_THAT(History(done), HasSubstr("so weftd killed it; 2 learners go on without a restart"));
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 40 * 12000) << done.dump(2);
  ExpectExactAudit(id, 40);
}

}  // namespace
}  // namespace weft
