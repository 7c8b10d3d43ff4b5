// Multi-learner (gang) jobs through a real weftd and real learners on two logical nodes:
// synchronous data parallelism reaches the single learner's accuracy on the same data budget,
// and a gang survives halt/resume and the death of one of its learners with one consistent
// checkpoint written by rank 0.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <set>
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
using testing::GangTest;
using ::testing::HasSubstr;
using testing::OneHostGangTest;

// MLP on 12,000 training images for 3 epochs: the same data budget for 1 and 2 learners.
const std::string kBudget =
    "model: {architecture: mlp, hidden_units: [128]}\n"
    "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
    "training: {epochs: 3, batch_size: 64, threads: 1, seed: 3}\n";
// For tests that halt, kill or restart something mid-training: long enough (≈ 1,900 steps, 10 s
// for 2 learners on the 2-core dev machine) that progress reports a second apart cannot let the
// job finish before the test acts.
const std::string kLongBudget =
    "model: {architecture: mlp, hidden_units: [128]}\n"
    "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
    "training: {epochs: 20, batch_size: 64, threads: 1, seed: 3}\n";

TEST_F(GangTest, TwoLearnersReachTheOneLearnerAccuracyOnTheSameDataBudget) {
  const std::string one = Submit("one", kBudget + "resources: {learners: 1, cpus: 1}\n");
  const std::string two = Submit("two", kBudget + "resources: {learners: 2, cpus: 1}\n");
  // The gang needs both nodes: it runs spread over node-a and node-b, all or nothing.
  json running = WaitUntil(
      two, [](const json& j) { return j.value("state", "") == "RUNNING"; }, 300, "RUNNING");
  ASSERT_EQ(running["learners"].size(), 2u) << running.dump(2);
  std::set<std::string> nodes = {running["learners"][0]["node"], running["learners"][1]["node"]};
  EXPECT_EQ(nodes, (std::set<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(testing::LearnerPids(two).size(), 2u);

  json a = WaitFor(one, {"COMPLETED"}, 300);
  json b = WaitFor(two, {"COMPLETED"}, 300);
  const double acc1 = a["models"]["final"]["test_accuracy"];
  const double acc2 = b["models"]["final"]["test_accuracy"];
  RecordProperty("one_learner_accuracy", std::to_string(acc1));
  RecordProperty("two_learner_accuracy", std::to_string(acc2));
  std::cout << "final test accuracy: 1 learner " << acc1 << ", 2 learners " << acc2 << "\n";
  EXPECT_GT(acc1, 0.80);
  EXPECT_NEAR(acc2, acc1, 0.01) << "within 1 point on the same data budget";
  // Same data budget: 3 epochs over 12,000 samples, in half the steps of twice the batch.
  EXPECT_EQ(a["progress"]["samples"], b["progress"]["samples"]);
  EXPECT_EQ(2 * b["progress"]["step"].get<int64_t>(), a["progress"]["step"].get<int64_t>());

  std::string history;
  for (const auto& e : b["history"]) history += e["reason"].get<std::string>() + "\n";
  EXPECT_THAT(history, HasSubstr("placed 2 learners on nodes node-a, node-b"));
  EXPECT_THAT(history, HasSubstr("all 2 learners registered"));

  // One log per learner; both joined the same process group and ended with identical replicas.
  const std::string log0 = Log(two, 0), log1 = Log(two, 1);
  EXPECT_THAT(log0, HasSubstr("as rank 0 of 2"));
  EXPECT_THAT(log1, HasSubstr("as rank 1 of 2"));
  auto sum0 = Matches(log0, "parameters checksum (\\S+)");
  auto sum1 = Matches(log1, "parameters checksum (\\S+)");
  ASSERT_EQ(sum0.size(), 1u) << log0;
  EXPECT_EQ(sum0, sum1);
  EXPECT_THAT(log0, HasSubstr("final model written"));
  EXPECT_THAT(log1, ::testing::Not(HasSubstr("model written"))) << "only rank 0 exports";
  EXPECT_NE(weftd_->Cli({"logs", two, "--rank", "2"}).exit_code, 0) << "no rank 2";

  // Metrics are reported once per job (rank 0): no step appears twice among training points.
  json metrics = Get("/v1/jobs/" + two + "/metrics");
  std::set<int64_t> steps;
  int training_points = 0;
  for (const auto& p : metrics["points"]) {
    if (!p.contains("train_loss")) continue;
    ++training_points;
    EXPECT_TRUE(steps.insert(p["step"].get<int64_t>()).second) << "step " << p["step"] << " twice";
  }
  EXPECT_GT(training_points, 0);
}

TEST_F(GangTest, GangHaltsResumesAndSurvivesAKilledLearnerFromRank0sCheckpoint) {
  const std::string id = Submit("gang", kLongBudget +
                                            "resources: {learners: 2, cpus: 1}\n"
                                            "checkpoint: {every_steps: 25, keep: 2}\n");
  WaitUntil(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 60; }, 300, "step 60");

  // Halt: both ranks stop after the same step; rank 0 writes that step's checkpoint.
  auto halt = weftd_->Cli({"halt", id});
  ASSERT_EQ(halt.exit_code, 0) << halt.output;
  WaitFor(id, {"HALTED"}, 60);
  for (int i = 0; i < 100 && !testing::LearnerPids(id).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(testing::LearnerPids(id).empty()) << "both learners exited";
  auto resume = weftd_->Cli({"resume", id});
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  json back = WaitUntil(
      id, [](const json& j) { return j.value("state", "") == "RUNNING" && j["attempt"] == 2; }, 120,
      "attempt 2 running");

  // kill -9 of rank 1: weft stops rank 0 too and restarts the gang from rank 0's checkpoint.
  WaitUntil(
      id,
      [&](const json& j) {
        return j["progress"].value("step", 0) >= back["progress"].value("step", 0) + 30;
      },
      300, "30 more steps");
  auto rank1 = testing::LearnerPids(id, 1);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(::kill(static_cast<pid_t>(rank1[0]), SIGKILL), 0);
  json done = WaitFor(id, {"COMPLETED"}, 400);
  std::string history;
  for (const auto& e : done["history"]) history += e["reason"].get<std::string>() + "\n";
  EXPECT_THAT(history, HasSubstr("halted by user"));
  EXPECT_THAT(history, HasSubstr("learner rank 1 killed by signal 9"));
  EXPECT_THAT(history, HasSubstr("from the checkpoint at step"));
  EXPECT_GE(done["attempt"].get<int>(), 3);

  // Every resume: both ranks loaded the same checkpoint, i.e. agreed on the step.
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  auto resumed0 = Matches(log0, "resumed from \\S+: epoch \\d+, step (\\d+)");
  auto resumed1 = Matches(log1, "resumed from \\S+: epoch \\d+, step (\\d+)");
  ASSERT_GE(resumed0.size(), 2u) << log0;
  EXPECT_EQ(resumed0, resumed1);
  EXPECT_THAT(log1, ::testing::Not(HasSubstr("checkpoint written"))) << "only rank 0 writes";
  // Rank 0 outlived rank 1 and checkpointed the last step both had completed; the gang resumed
  // from exactly that step, so the kill cost no steps beyond the one in flight.
  auto emergency = Matches(log0, "checkpointed step (\\d+), the last step all learners completed");
  ASSERT_EQ(emergency.size(), 1u) << log0;
  EXPECT_EQ(resumed0.back(), emergency[0]);
  auto sum0 = Matches(log0, "parameters checksum (\\S+)");
  EXPECT_EQ(sum0, Matches(log1, "parameters checksum (\\S+)"));
  EXPECT_GT(done["models"]["final"]["test_accuracy"].get<double>(), 0.80);
  ExpectExactAudit(id, 20);
  // The first attempt timed the kernels and cached them in the job's logs/kernels.tsv (whichever
  // rank finished timing first wrote it; the other may already have read it); each later attempt
  // took every layer's choice from there.
  const int attempts = done["attempt"].get<int>();
  int timed_in_first = 0;
  for (const std::string& log : {log0, log1}) {
    std::vector<std::string> by_attempt(static_cast<size_t>(attempts) + 1);
    std::regex line_re(
        "attempt (\\d+) pid|kernel of fc1 \\[\\d+, \\d+\\] -> \\d+: \\w+(, cached)?");
    size_t attempt = 0;
    for (std::sregex_iterator it(log.begin(), log.end(), line_re), end; it != end; ++it) {
      if ((*it)[1].matched) {
        attempt = std::stoul((*it)[1].str());
        ASSERT_LE(attempt, static_cast<size_t>(attempts)) << log;
      } else {
        by_attempt[attempt] += (*it)[2].matched ? 'c' : 't';
      }
    }
    if (by_attempt[1] == "t") ++timed_in_first;
    EXPECT_THAT(by_attempt[1], ::testing::AnyOf("t", "c")) << log;
    for (int a = 2; a <= attempts; ++a) {
      EXPECT_EQ(by_attempt[a], "c") << "attempt " << a << "\n" << log;
    }
  }
  EXPECT_GE(timed_in_first, 1) << "no rank timed the kernels in attempt 1";
}

// A peer that stops answering keeps its connections open, so the survivor's collective gets no
// word of it (as happens, now and then, to a peer killed by SIGKILL: Gloo waits out its whole
// timeout). Halted then, rank 0 gives its collective up 2 s after weftd's SIGTERM and
// checkpoints the last step both ranks completed, well before its SIGKILL (10 s); the resume
// starts from that step.
TEST_F(GangTest, ASurvivorStoppedWhileAPeerIsSilentGivesUpItsCollectiveAndCheckpoints) {
  const std::string id = Submit("silent", kLongBudget +
                                              "resources: {learners: 2, cpus: 1}\n"
                                              "checkpoint: {every_steps: 1000, keep: 2}\n");
  WaitUntil(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 40; }, 300, "step 40");
  auto rank1 = testing::LearnerPids(id, 1);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(::kill(static_cast<pid_t>(rank1[0]), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 waits on it by now
  auto halt = weftd_->Cli({"halt", id});
  ASSERT_EQ(halt.exit_code, 0) << halt.output;
  WaitFor(id, {"HALTED"}, 60);
  for (int i = 0; i < 300 && !testing::LearnerPids(id).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(testing::LearnerPids(id).empty()) << "the stopped rank 1 is killed after the grace";
  const std::string log0 = Log(id, 0);
  EXPECT_EQ(Matches(log0, "gave up a collective after \\d+ ms: (this learner was asked to stop)"),
            std::vector<std::string>{"this learner was asked to stop"})
      << log0;
  auto emergency = Matches(log0, "checkpointed step (\\d+), the last step all learners completed");
  ASSERT_EQ(emergency.size(), 1u) << log0;
  EXPECT_GE(std::stoi(emergency[0]), 40);

  auto resume = weftd_->Cli({"resume", id});
  ASSERT_EQ(resume.exit_code, 0) << resume.output;
  WaitUntil(
      id,
      [&](const json& j) {
        return j["attempt"] == 2 && j["progress"].value("step", 0) > std::stoi(emergency[0]);
      },
      120, "attempt 2 past the checkpointed step");
  const std::string again0 = Log(id, 0), again1 = Log(id, 1);
  const std::string resumed = "resumed from \\S+: epoch \\d+, step (\\d+)";
  EXPECT_EQ(Matches(again0, resumed), emergency) << again0;
  EXPECT_EQ(Matches(again1, resumed), emergency) << again1;
  weftd_->Cli({"halt", id});
}

// Rank 1 dies while the gang evaluates the end of epoch 1 (a failpoint between its part of the
// evaluation and the allreduce that sums the parts): rank 0 checkpoints that step with the
// evaluation still due, and the restarted gang evaluates it before training on, so no epoch's
// evaluation (nor a deliver decision) is skipped.
TEST_F(GangTest, AnEvaluationInterruptedByALostLearnerIsRedoneAfterTheRestart) {
  weftd_->Kill();
  weftd_->set_env(
      {"WEFT_LEARNER_FAILPOINT=evaluation-before-allreduce@1", "WEFT_LEARNER_FAILPOINT_RANK=1"});
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  const std::string id = Submit("eval", kBudget + "resources: {learners: 2, cpus: 1}\n");
  json done = WaitFor(id, {"COMPLETED"}, 300);
  EXPECT_EQ(done["attempt"], 2);
  std::string history;
  for (const auto& e : done["history"]) history += e["reason"].get<std::string>() + "\n";
  EXPECT_THAT(history, HasSubstr("learner rank 1 killed by signal 9"));
  const std::string log0 = Log(id, 0);
  // 6,000 samples per learner at batch 64: epoch 1 ends at step 94.
  EXPECT_EQ(Matches(log0, "checkpointed step (\\d+), the last step all learners completed"),
            std::vector<std::string>{"94"})
      << log0;
  EXPECT_EQ(Matches(log0, "evaluating step (\\d+) first"), std::vector<std::string>{"94"}) << log0;
  // One evaluation per epoch in the job's metrics, epoch 1's included.
  json metrics = Get("/v1/jobs/" + id + "/metrics");
  std::map<int, int> evaluations;
  for (const auto& p : metrics["points"]) {
    if (p.contains("test_accuracy")) ++evaluations[p["epoch"].get<int>()];
  }
  EXPECT_EQ(evaluations, (std::map<int, int>{{1, 1}, {2, 1}, {3, 1}})) << metrics.dump();
}

TEST_F(GangTest, AGangOutlivesAKilledWeftdAndIsAdoptedWhole) {
  const std::string id = Submit("adopt", kLongBudget + "resources: {learners: 2, cpus: 1}\n");
  WaitUntil(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 40; }, 300, "step 40");
  auto sorted_pids = [&] {
    auto pids = testing::LearnerPids(id);
    std::sort(pids.begin(), pids.end());
    return pids;
  };
  const auto before = sorted_pids();
  ASSERT_EQ(before.size(), 2u);
  weftd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(sorted_pids(), before) << "both learners keep training without weftd";
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json done = WaitFor(id, {"COMPLETED"}, 300);
  EXPECT_EQ(done["attempt"], 1) << "adopted, never restarted";
  EXPECT_THAT(weftd_->log(), HasSubstr("(2 learner(s) in all)"));
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  EXPECT_THAT(log0, ::testing::Not(HasSubstr("resumed from")));
  auto sum0 = Matches(log0, "parameters checksum (\\S+)");
  ASSERT_EQ(sum0.size(), 1u);
  EXPECT_EQ(sum0, Matches(log1, "parameters checksum (\\S+)"));
}

// An elastic job {min 1, max 2} takes both nodes while nobody else wants them. When another
// job arrives it gives one back in place: its last learner leaves at a step boundary, the other
// goes on alone in a new generation, and the other job starts once the learner has left; when
// that job ends the elastic job grows back to 2, again without a restart. Every epoch still trains
// each of its 12,000 samples once (the audit says so).
TEST_F(GangTest, AnElasticJobGivesBackWhatItGrewIntoInPlaceAndGrowsBackAfter) {
  // 60 epochs (≈ 25 s here): long enough to shrink for the other job and grow back after it.
  const std::string id =
      Submit("elastic",
             "model: {architecture: mlp, hidden_units: [128]}\n"
             "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
             "training: {epochs: 60, batch_size: 64, threads: 1, seed: 3}\n"
             "resources: {learners: {min: 1, max: 2}, cpus: 1}\n"
             "checkpoint: {every_steps: 25, keep: 2}\n");
  json running = WaitUntil(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 60; }, 300, "step 60");
  EXPECT_EQ(running["learners"].size(), 2u) << "grown to its maximum on an idle cluster";
  auto show = weftd_->Cli({"show", id});
  EXPECT_THAT(show.output, HasSubstr("learners:  2 (elastic, 1 to 2): rank 0 on node-"));

  // Another job of the same tenant and priority: it could preempt nothing, but the elastic job's
  // second learner came from idle capacity.
  const std::map<int, int64_t> first = PidsById(running);
  const std::string other =
      Submit("other",
             "model: {architecture: mlp, hidden_units: [16]}\n"
             "data: {dataset: fashion-mnist, train_samples: 2000, test_samples: 500}\n"
             "training: {epochs: 1, threads: 1}\nresources: {learners: 1, cpus: 1}\n");
  // Its one short epoch may be over before a poll sees it RUNNING: placed is what matters here.
  json other_placed = WaitUntil(
      other,
      [](const json& j) {
        const std::string state = j.value("state", "");
        return state == "RUNNING" || state == "COMPLETED";
      },
      120, "RUNNING or COMPLETED");
  auto other_node = Matches(History(other_placed), "placed on node (\\S+)");
  ASSERT_EQ(other_node.size(), 1u) << History(other_placed);
  WaitForLog(id, 1, "is not a member of generation 2; leaving the job", 60);
  WaitForLog(id, 0, "generation 2: rank 0 of 1, training on from step", 60);
  // The other job (one short epoch) may have ended by now and this one grown back already
  // (generation 3): the shrink is read from the history, not from the current learners.
  json shrunk = Get("/v1/jobs/" + id);
  EXPECT_THAT(History(shrunk),
              HasSubstr("generation 2: shrink to 1: a waiting job needs the idle capacity"));
  EXPECT_EQ(shrunk["attempt"], 1) << "shrunk without a restart";
  EXPECT_EQ(PidsById(shrunk).at(0), first.at(0)) << "learner 0 trains on";
  EXPECT_NE(shrunk["learners"][0]["node"], other_node[0]);
  // The other job (1 short epoch) ends first; the elastic job grows back into its node in place:
  // a newcomer joins the running learner at a new generation of the same attempt.
  WaitFor(other, {"COMPLETED"}, 300);
  WaitForLog(id, 2, "joined generation 3 as rank 1 of 2 at step", 120);
  json regrown = Get("/v1/jobs/" + id);
  EXPECT_EQ(regrown["learners"].size(), 2u) << regrown.dump(2);
  EXPECT_EQ(PidsById(regrown).at(0), first.at(0)) << "learner 0 trains on";

  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << "never restarted";
  // 60 epochs of 12,000 samples, each trained once, by 2 learners, then 1, then 2 again.
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 60 * 12000) << done.dump(2);
  // Steps at 2, 1 and 2 learners: the total follows the world size and is met exactly.
  EXPECT_EQ(done["progress"]["step"], done["progress"]["steps_total"]) << done["progress"].dump();
  EXPECT_GT(done["models"]["final"]["test_accuracy"].get<double>(), 0.80);
  const std::string history = History(done);
  EXPECT_THAT(history, HasSubstr("placed 2 learners on nodes node-a, node-b"));
  EXPECT_THAT(history, HasSubstr("generation 2: shrink to 1: a waiting job needs the idle capacity "
                                 "it grew into; learner 1 leaves at the next step boundary; 1 "
                                 "learner goes on without a restart (rank 0 is learner 0)"));
  EXPECT_THAT(history, HasSubstr("generation 3: grow to 2: idle capacity; learner 2 joins without "
                                 "a restart"));
  ExpectExactAudit(id, 60);
}

// weftd under the goodput policy (issue 46), on the two one-cpu nodes.
class GoodputGangTest : public GangTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o = GangTest::Options();
    o.args = {"--policy", "goodput"};
    return o;
  }
};

// The goodput policy resizes an elastic job in place as fair share does: it starts at its
// minimum (weftd has no model of it yet), grows to 2 once its live model says the second learner
// saves more than the resize costs, and gives the learner back in place when another job
// arrives (or when the speedup it measured at 2 is not worth it). Learner 0 trains on throughout:
// one attempt, every sample of every epoch once.
TEST_F(GoodputGangTest, AnElasticJobGrowsAndShrinksInPlaceUnderTheGoodputPolicy) {
  const std::string id =
      Submit("elastic",
             "model: {architecture: mlp, hidden_units: [128]}\n"
             "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
             "training: {epochs: 60, batch_size: 64, threads: 1, seed: 3}\n"
             "resources: {learners: {min: 1, max: 2}, cpus: 1}\n");
  json grown = WaitUntil(
      id, [](const json& j) { return j["learners"].size() == 2; }, 300, "2 learners");
  EXPECT_THAT(History(grown), HasSubstr("generation 2: grow to 2: the goodput policy's speedup "
                                        "gain is worth the resize; learner 1 joins without a "
                                        "restart"));
  const std::map<int, int64_t> first = PidsById(grown);
  ASSERT_EQ(first.count(0), 1u) << grown.dump(2);

  const std::string other =
      Submit("other",
             "model: {architecture: mlp, hidden_units: [16]}\n"
             "data: {dataset: fashion-mnist, train_samples: 2000, test_samples: 500}\n"
             "training: {epochs: 1, threads: 1}\nresources: {learners: 1, cpus: 1}\n");
  json shrunk = WaitUntil(
      id,
      [](const json& j) {
        return testing::HistoryText(j).find(
                   "shrink to 1: the goodput policy's sizing by measured speedup") !=
               std::string::npos;
      },
      300, "a shrink");
  EXPECT_EQ(shrunk["attempt"], 1) << "shrunk without a restart";
  EXPECT_EQ(PidsById(shrunk).at(0), first.at(0)) << "learner 0 trains on";
  WaitFor(other, {"COMPLETED"}, 300);
  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << "never restarted";
  EXPECT_THAT(Log(id, 0), ::testing::Not(HasSubstr("resumed from")));
  // One start of learner 0's process in its log (the pid there is its container's own).
  EXPECT_EQ(Matches(Log(id, 0), "attempt 1 pid (\\d+)").size(), 1u)
      << "learner 0 is one process from start to end";
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 60 * 12000) << done.dump(2);
  ExpectExactAudit(id, 60);
}

// Issue 14's test: an elastic job loses a learner, then its rank 0, and grows back each time, all
// without a restart: the survivors' processes go on, the history shows each generation, and
// every sample of every epoch is trained exactly once.
TEST_F(ElasticGangTest, AnElasticJobLosesALearnerThenRank0AndGrowsBackWithoutARestart) {
  std::map<int, int64_t> first;
  const std::string id = StartElastic(60, 100, "checkpoint: {every_steps: 100, keep: 2}\n", &first);
  ASSERT_EQ(first.size(), 3u);
  json j;

  // kill -9 of learner 1 (rank 1), mid-epoch.
  ASSERT_EQ(::kill(static_cast<pid_t>(first.at(1)), SIGKILL), 0);
  // The survivors re-form with a newcomer (weftd regrows into the freed node at once) and train.
  WaitForLog(id, 0, "generation 3: rank 0 of 3, training on from step", 120);
  WaitForLog(id, 3, "joined generation 3 as rank 2 of 3 at step", 120);
  j = Get("/v1/jobs/" + id);
  std::map<int, int64_t> second = PidsById(j);
  EXPECT_EQ(second.count(1), 0u) << "learner 1 is gone";
  EXPECT_EQ(second.at(0), first.at(0)) << "learner 0 was not restarted";
  EXPECT_EQ(second.at(2), first.at(2)) << "learner 2 was not restarted";
  EXPECT_EQ(j["attempt"], 1);

  // kill -9 of learner 0, rank 0: the one that served the group's rendezvous and kept the audit.
  ASSERT_EQ(::kill(static_cast<pid_t>(second.at(0)), SIGKILL), 0);
  WaitForLog(id, 2, "generation 5: rank 0 of 3, training on from step", 120);
  WaitForLog(id, 4, "joined generation 5 as rank 2 of 3 at step", 120);
  j = Get("/v1/jobs/" + id);
  EXPECT_EQ(j.value("generation", 0), 5);
  std::map<int, int64_t> third = PidsById(j);
  EXPECT_EQ(third.count(0), 0u);
  EXPECT_EQ(third.at(2), first.at(2)) << "learner 2 was not restarted";
  for (const auto& [learner, pid] : second) {
    if (learner != 0) {
      EXPECT_EQ(third.at(learner), pid) << "learner " << learner;
    }
  }
  EXPECT_EQ(j["learners"][0].value("id", -1), 2) << "the lowest surviving rank leads";

  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << "never restarted";
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 60 * 12000) << done.dump(2);
  EXPECT_DOUBLE_EQ(done["progress"]["fraction"].get<double>(), 1.0) << done["progress"].dump();
  EXPECT_GT(done["models"]["final"]["test_accuracy"].get<double>(), 0.80);
  const std::string history = History(done);
  EXPECT_THAT(history, HasSubstr("generation 2: learner 1 killed by signal 9 (SIGKILL); 2 learners "
                                 "go on without a restart (rank 0 is learner 0"));
  EXPECT_THAT(history, HasSubstr("generation 3: grow to 3: idle capacity; learner 3 joins without "
                                 "a restart"));
  EXPECT_THAT(history, HasSubstr("generation 4: learner 0 killed by signal 9 (SIGKILL); 2 learners "
                                 "go on without a restart (rank 0 is learner 2"));
  EXPECT_THAT(history, HasSubstr("generation 5: grow to 3: idle capacity; learner 4 joins"));
  ExpectExactAudit(id, 60);

  // The same data budget trained by a fixed gang of 3 from start to end: the elastic run (3, 2,
  // 3, 2, 3 learners, its rate rescaled at each change) reaches the same accuracy within a point.
  // The best of its evaluations, as an epoch's accuracy moves by a point from one to the next.
  json fixed = WaitFor(Submit("fixed", MlpJob(60, "3")), {"COMPLETED"}, 400);
  const double elastic_best = done.value("best_test_accuracy", 0.0);
  const double fixed_best = fixed.value("best_test_accuracy", 0.0);
  std::cout << "best test accuracy: elastic " << elastic_best << ", fixed " << fixed_best << "\n";
  EXPECT_GT(fixed_best, 0.84);
  EXPECT_NEAR(elastic_best, fixed_best, 0.01) << "within 1 point on the same data budget";
}

// weftd killed and restarted after a generation change: it adopts the learners with their ids and
// generation, and the next loss is handled in place by the new weftd.
TEST_F(ElasticGangTest, ARestartedWeftdAdoptsTheGenerationAndTheNextLossIsInPlaceToo) {
  std::map<int, int64_t> first;
  const std::string id = StartElastic(40, 60, "", &first);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(::kill(static_cast<pid_t>(first.at(1)), SIGKILL), 0);
  WaitForLog(id, 0, "generation 3: rank 0 of 3, training on from step", 120);
  WaitForLog(id, 3, "joined generation 3 as rank 2 of 3 at step", 120);

  weftd_->Kill();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json j = Get("/v1/jobs/" + id);
  EXPECT_EQ(j.value("generation", 0), 3) << j.dump(2);
  const std::map<int, int64_t> adopted = PidsById(j);
  EXPECT_EQ(adopted.at(0), first.at(0));
  EXPECT_EQ(adopted.at(2), first.at(2));

  ASSERT_EQ(::kill(static_cast<pid_t>(adopted.at(0)), SIGKILL), 0);
  WaitForLog(id, 2, "generation 5: rank 0 of 3, training on from step", 120);
  json done = WaitFor(id, {"COMPLETED"}, 400);
  EXPECT_EQ(done["attempt"], 1) << History(done);
  EXPECT_EQ(PidsById(Get("/v1/jobs/" + id)).size(), 0u);
  EXPECT_EQ(done["progress"]["samples"].get<int64_t>(), 40 * 12000) << done.dump(2);
  ExpectExactAudit(id, 40);
}

// A gang placed on one host trains as one learner (issue 19, item 4): rank 0 with both learners'
// threads at the gang's global batch and learning rate, rank 1 standing by. It trains the same
// samples per step as the gang does (resources.gang_on_one_host: learners), so it reaches the
// same accuracy up to float rounding, and the audit still finds every sample once per epoch.
TEST_F(OneHostGangTest, AGangOnOneHostTrainsAsOneLearnerAndAsTheGangWould) {
  const std::string gang =
      Submit("gang", kBudget + "resources: {learners: 2, cpus: 1, gang_on_one_host: learners}\n");
  json g = WaitFor(gang, {"COMPLETED"}, 300);
  const std::string one = Submit("one", kBudget + "resources: {learners: 2, cpus: 1}\n");
  json o = WaitFor(one, {"COMPLETED"}, 300);
  EXPECT_THAT(History(g), ::testing::Not(HasSubstr("as one learner")));
  EXPECT_THAT(Log(gang, 1), HasSubstr("training mlp on 12000 samples"));
  EXPECT_THAT(History(o),
              HasSubstr("all 2 on node node-a, so rank 0 trains for the gang as one learner (2 "
                        "threads, batch 128"));
  const std::string log0 = Log(one, 0), log1 = Log(one, 1);
  EXPECT_THAT(log0, HasSubstr("batch 128 per learner (128 in all)")) << log0;
  EXPECT_THAT(log0, HasSubstr("2 threads, learning rate 0.00141421")) << log0;
  EXPECT_THAT(log1, HasSubstr("standing by")) << log1;
  EXPECT_THAT(log1, ::testing::Not(HasSubstr("training mlp"))) << log1;
  ExpectExactAudit(one, 3);
  const double acc_gang = g["models"]["final"]["test_accuracy"];
  const double acc_one = o["models"]["final"]["test_accuracy"];
  RecordProperty("gang_accuracy", std::to_string(acc_gang));
  RecordProperty("one_learner_accuracy", std::to_string(acc_one));
  EXPECT_NEAR(acc_one, acc_gang, 0.01);
}

// Losing the rank that stands by is losing a learner of the gang: rank 0 checkpoints the step it
// trained last, and the gang restarts from there and completes.
TEST_F(OneHostGangTest, ALostStandingByLearnerRestartsTheGangFromItsLastStep) {
  const std::string id = StartLongOneHostGang("lost");
  auto rank1 = testing::LearnerPids(id, 1);
  ASSERT_EQ(rank1.size(), 1u);
  ASSERT_EQ(::kill(static_cast<pid_t>(rank1[0]), SIGKILL), 0);
  json done = WaitFor(id, {"COMPLETED"}, 300);
  EXPECT_EQ(done["attempt"], 2);
  EXPECT_THAT(History(done), HasSubstr("learner rank 1 killed by signal 9"));
  // Rank 0, stopped with the gang, checkpointed its last step; attempt 2 resumed from it.
  const std::string log0 = Log(id, 0);
  const size_t second = log0.find("attempt 2 pid");
  ASSERT_NE(second, std::string::npos) << log0;
  auto written = Matches(log0.substr(0, second), "checkpoint written: \\S+ \\(step (\\d+),");
  auto resumed = Matches(log0.substr(second), "resumed from \\S+: epoch \\d+, step (\\d+)");
  ASSERT_FALSE(written.empty()) << log0;
  ASSERT_EQ(resumed.size(), 1u) << log0;
  EXPECT_EQ(resumed[0], written.back());
  EXPECT_EQ(Log(id, 1).find("training mlp"), std::string::npos) << "rank 1 never trains";
  ExpectExactAudit(id, 40);
}

// weftd killed while a gang trains as one learner: the next weftd adopts both processes (the
// launch it rebuilds says "as one" again, from the same placement), and the job completes at
// attempt 1 without a resume.
TEST_F(OneHostGangTest, AGangTrainingAsOneLearnerOutlivesAKilledWeftd) {
  const std::string id = StartLongOneHostGang("adopt");
  ASSERT_EQ(testing::LearnerPids(id).size(), 2u);
  weftd_->Kill();
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json done = WaitFor(id, {"COMPLETED"}, 300);
  EXPECT_EQ(done["attempt"], 1) << "adopted, never restarted";
  EXPECT_THAT(weftd_->log(), HasSubstr("(2 learner(s) in all)"));
  EXPECT_THAT(Log(id, 0), ::testing::Not(HasSubstr("resumed from")));
  EXPECT_THAT(Log(id, 1), HasSubstr("standing by"));
  ExpectExactAudit(id, 40);
}

}  // namespace
}  // namespace weft
