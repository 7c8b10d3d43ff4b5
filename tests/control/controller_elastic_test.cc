// The controller's side of an elastic job's in-place membership changes (issue 14): a lost
// learner moves the job to a new generation without stopping the survivors, who learn their new
// ranks from OnRegroup; a grow starts newcomers that join a new generation; a shrink lets the
// last learners leave; below its minimum the gang restarts as a fixed one does. Under the goodput
// and targets policies too (issue 46), resizes are in place.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/controller_fixture.h"
#include "scheduler/fair_share_policy.h"
#include "scheduler/goodput_policy.h"
#include "scheduler/targets_policy.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = RegroupDecision::Kind;

constexpr char kElastic[] = R"(
name: elastic
model: {architecture: mlp}
training: {epochs: 2}
resources: {learners: {min: 1, max: 2}, cpus: 1, memory_mb: 1024}
)";
// A job of the same tenant that needs the cpu the elastic job grew into.
constexpr char kOther[] = R"(
name: other
model: {architecture: mlp}
training: {epochs: 1}
resources: {learners: 1, cpus: 1, memory_mb: 1024}
)";

class ElasticControllerTest : public ControllerTest {
 protected:
  // An elastic job running as 2 learners (ids 0 and 1) on the 2-cpu node.
  std::string StartTwo() {
    MakeController(&fair_share_);
    std::string id = Submit(kElastic);
    controller_->Tick();
    EXPECT_EQ(executor_.launches.size(), 2u) << "grown to its maximum on an idle node";
    EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
    EXPECT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 0, {}).accepted);
    EXPECT_EQ(State(id), JobState::kRunning);
    EXPECT_EQ(store_->GetJob(id)->generation, 1);
    return id;
  }
  std::string History(const std::string& id) {
    absl::StatusOr<std::vector<StateEvent>> history = store_->History(id);
    if (!history.ok()) return std::string(history.status().message());
    std::string text;
    for (const StateEvent& e : *history) text += e.reason + "\n";
    return text;
  }
  // Under `policy` (goodput or targets, named `name` in the history): the elastic job starts at
  // its minimum (no model of it yet), grows in place once its live model says a second learner
  // saves more than the resize costs, and shrinks in place for a job that arrives; its learner 0
  // is never stopped or restarted.
  void GrowsAndShrinksInPlaceUnder(scheduler::Policy* policy, const std::string& name) {
    MakeController(policy);
    const std::string id = Submit(kElastic);
    controller_->Tick();
    ASSERT_EQ(executor_.launches.size(), 1u) << "started at its minimum";
    ASSERT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
    MetricRecord m;
    m.step = 10;
    // 10 of 10,000 steps done at 1,000 samples/s: a second learner (estimated 1.48× the
    // throughput until measured) saves minutes, far more than the resize's 1 s.
    m.samples_per_s = 1000;
    ASSERT_EQ(controller_->OnMetrics(id, 0, 1, {m}, JobProgress{0, 2, 10, 10000, 640}),
              ReportAnswer::kKeepRunning);
    controller_->Tick();
    JobRecord r = *store_->GetJob(id);
    ASSERT_EQ(r.learners.size(), 2u) << History(id);
    EXPECT_EQ(r.attempt, 1) << "no restart";
    EXPECT_THAT(History(id), HasSubstr(absl::StrCat("generation 2: grow to 2: the ", name,
                                                    " policy's speedup gain is worth the resize; "
                                                    "learner 1 joins without a restart")));
    ASSERT_EQ(executor_.launches.size(), 2u);
    ASSERT_EQ(controller_->OnRegroup(id, 1, 1, 1)->kind, Kind::kReform) << "the newcomer";
    ASSERT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kReform);
    ASSERT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 0, {}).accepted);

    executor_.stopped.clear();
    const std::string other = Submit(kOther);
    controller_->Tick();
    EXPECT_TRUE(executor_.stopped.empty()) << "the leaver leaves itself";
    r = *store_->GetJob(id);
    EXPECT_EQ(r.state, JobState::kRunning);
    EXPECT_EQ(r.attempt, 1) << "no restart";
    ASSERT_EQ(r.learners.size(), 1u) << History(id);
    EXPECT_EQ(r.learners[0].id, 0);
    EXPECT_THAT(History(id), HasSubstr(absl::StrCat("generation 3: shrink to 1: the ", name,
                                                    " policy's sizing by measured speedup")));
    EXPECT_EQ(State(other), JobState::kQueued) << "until the leaver has exited";
    EXPECT_EQ(controller_->OnRegroup(id, 1, 1, 2)->kind, Kind::kStop);
    executor_.Exit(id, 1, kLearnerExitStopped, 0, /*rank=*/1);
    controller_->Tick();
    controller_->Tick();
    EXPECT_NE(State(other), JobState::kQueued) << "placed once the learner left";
    EXPECT_EQ(store_->GetJob(id)->attempt, 1);
  }
  scheduler::FairSharePolicy fair_share_;
};

TEST_F(ElasticControllerTest, UnderTheGoodputPolicyAJobGrowsAndShrinksInPlace) {
  scheduler::GoodputPolicy goodput;
  GrowsAndShrinksInPlaceUnder(&goodput, "goodput");
}

// Between weftd's grow and the old generation's re-forming, rank 0 goes on training alone and
// reports that generation's throughput. Filed under the two learners weftd already holds, it
// said a second learner gains nothing, and goodput gave the learner to another job a round later
// (seen live: grow, shrink 1.2 s later, twice in one job). Filed under the size it was
// measured at, the grown job keeps its learner: on 4 cpus, it and a second elastic job have 2 each.
TEST_F(ElasticControllerTest, ThroughputIsFiledUnderTheWorldSizeItWasMeasuredAt) {
  adjust_options_ = [](ControllerOptions& o) { o.nodes[0].capacity.cpus = 4; };
  scheduler::GoodputPolicy goodput;
  MakeController(&goodput);
  const std::string id = Submit(kElastic);
  controller_->Tick();
  ASSERT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
  MetricRecord m;
  m.step = 10;
  m.samples_per_s = 1000;
  m.world_size = 1;
  ASSERT_EQ(controller_->OnMetrics(id, 0, 1, {m}, JobProgress{0, 2, 10, 10000, 640}),
            ReportAnswer::kKeepRunning);
  const std::string wide = Submit(R"(
name: wide
model: {architecture: mlp}
training: {epochs: 2}
resources: {learners: {min: 1, max: 3}, cpus: 1, memory_mb: 1024}
)");
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(id)->learners.size(), 2u) << History(id);
  ASSERT_EQ(store_->GetJob(wide)->learners.size(), 1u) << "no model of it yet: its minimum";
  // The one-learner generation goes on until the newcomer has joined, and says so.
  m.step = 20;
  ASSERT_EQ(controller_->OnMetrics(id, 0, 1, {m}, JobProgress{0, 2, 20, 10000, 1280}),
            ReportAnswer::kKeepRunning);
  ASSERT_EQ(controller_->OnRegroup(id, 1, 1, 1)->kind, Kind::kReform);
  ASSERT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kReform);
  ASSERT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 0, {}).accepted);
  const int64_t wide_attempt = store_->GetJob(wide)->attempt;
  ASSERT_TRUE(controller_->OnRegister(wide, 0, wide_attempt, 4244, 0, {}).accepted);
  ASSERT_EQ(controller_->OnMetrics(wide, 0, wide_attempt, {m}, JobProgress{0, 2, 10, 10000, 640}),
            ReportAnswer::kKeepRunning);
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(id)->learners.size(), 2u) << History(id);
  EXPECT_THAT(History(id), Not(HasSubstr("shrink")));
  EXPECT_EQ(store_->GetJob(wide)->learners.size(), 2u) << History(wide);
}

TEST_F(ElasticControllerTest, UnderTheTargetsPolicyAJobGrowsAndShrinksInPlace) {
  scheduler::TargetsPolicy targets;
  GrowsAndShrinksInPlaceUnder(&targets, "targets");
}

TEST_F(ElasticControllerTest, ALostLearnerIsANewGenerationAndTheSurvivorIsNotStopped) {
  const std::string id = StartTwo();
  // Learner 0 (rank 0) is killed; the fair-share policy is not asked to regrow this round.
  executor_.stopped.clear();
  executor_.Exit(id, 1, -1, 9, /*rank=*/0);
  controller_->Tick();
  EXPECT_TRUE(executor_.stopped.empty()) << "the survivor must not be stopped";
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.state, JobState::kRunning);
  EXPECT_EQ(r.attempt, 1) << "no restart";
  EXPECT_GE(r.generation, 2);
  EXPECT_THAT(History(id), HasSubstr("generation 2: learner 0 killed by signal 9 (SIGKILL); 1 "
                                     "learner goes on without a restart (rank 0 is learner 1)"));
  EXPECT_EQ(r.restarts, 0);

  // The survivor asks where to go: rank 0 of the new generation (alone: no rendezvous needed).
  absl::StatusOr<RegroupDecision> d = controller_->OnRegroup(id, 1, 1, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, Kind::kReform);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->generation, r.generation);
  // The lost learner is no member; a stale attempt is told to stop; the current generation waits.
  EXPECT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kStop);
  EXPECT_EQ(controller_->OnRegroup(id, 1, 7, 1)->kind, Kind::kStop);
  EXPECT_EQ(controller_->OnRegroup(id, 1, 1, r.generation)->kind, Kind::kWait);
  // Learner 1 now leads: its metrics are the job's, its success completes the job.
  MetricRecord m;
  m.step = 40;
  m.test_accuracy = 0.8;
  EXPECT_EQ(controller_->OnMetrics(id, 1, 1, {m}, JobProgress{1, 2, 40, 80, 2560}),
            ReportAnswer::kKeepRunning);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 40);
}

TEST_F(ElasticControllerTest, AGrowStartsANewcomerThatJoinsTheRunningLearners) {
  const std::string id = StartTwo();
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();  // generation 2 without learner 1
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(id)->generation, 2)
      << "no grow before the survivor has re-formed: it must not wait for a newcomer";
  ASSERT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kReform);
  EXPECT_FALSE(controller_->NewcomersStarting(id));
  controller_->Tick();  // grows into learner 1's cpu
  JobRecord r = *store_->GetJob(id);
  ASSERT_EQ(r.learners.size(), 2u) << History(id);
  EXPECT_EQ(r.generation, 3);
  EXPECT_EQ(r.attempt, 1);
  EXPECT_EQ(r.learners[0].id, 0);
  EXPECT_EQ(r.learners[1].id, 2) << "a newcomer gets a new id";
  EXPECT_THAT(History(id), HasSubstr("generation 3: grow to 2: idle capacity; learner 2 joins "
                                     "without a restart (2 learners, rendezvous at "
                                     "127.0.0.1:29400)"));
  ASSERT_EQ(executor_.launches.size(), 3u);
  const LearnerLaunch& l = executor_.launches[2];
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.generation, 3);
  EXPECT_EQ(l.generation_rank, 1);
  EXPECT_EQ(l.world_size, 2);
  EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(r.learners[1].pid, 4244);
  // Heartbeats announce generation 3 once the newcomer is ready (it asks, data loaded); then the
  // running learner re-forms as rank 0 of 2 with it.
  // Until then its peers are asked to heartbeat sooner, so they learn it promptly.
  EXPECT_EQ(controller_->Generation(id), 2);
  EXPECT_TRUE(controller_->NewcomersStarting(id));
  absl::StatusOr<RegroupDecision> ready = controller_->OnRegroup(id, 2, 1, 2);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->kind, Kind::kReform);
  EXPECT_EQ(ready->rank, 1);
  EXPECT_EQ(controller_->Generation(id), 3);
  EXPECT_FALSE(controller_->NewcomersStarting(id));
  absl::StatusOr<RegroupDecision> d = controller_->OnRegroup(id, 0, 1, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Kind::kReform);
  EXPECT_EQ(d->generation, 3);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->world_size, 2);
  EXPECT_EQ(d->rendezvous_port, 29400);
  EXPECT_TRUE(controller_->OnRegister(id, 2, 1, 4244, 2, {}).accepted) << "the newcomer registers";
}

// A resize waits until every member has been told the one before. A shrink decided after a
// grow's newcomer is ready but before the running learner has asked would send that learner
// straight to the shrink's generation, leaving the newcomer at the grow's rendezvous, where no
// one comes (seen live under the targets policy: docs/simulation.md "Live replay").
TEST_F(ElasticControllerTest, AShrinkWaitsUntilTheRunningLearnerHasJoinedTheGrowsGeneration) {
  const std::string id = StartTwo();
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();  // generation 2 without learner 1
  ASSERT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kReform);
  controller_->Tick();  // generation 3: grown back to 2 with newcomer 2
  ASSERT_EQ(store_->GetJob(id)->generation, 3) << History(id);
  ASSERT_EQ(controller_->OnRegroup(id, 2, 1, 2)->kind, Kind::kReform) << "the newcomer is ready";
  const std::string other = Submit(kOther);
  controller_->Tick();
  controller_->Tick();
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.generation, 3) << "no shrink before learner 0 has been told generation 3\n"
                             << History(id);
  EXPECT_EQ(r.learners.size(), 2u);
  EXPECT_EQ(State(other), JobState::kQueued);
  absl::StatusOr<RegroupDecision> d = controller_->OnRegroup(id, 0, 1, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->generation, 3) << "learner 0 joins the grow's generation";
  EXPECT_EQ(d->world_size, 2);
  controller_->Tick();
  r = *store_->GetJob(id);
  EXPECT_EQ(r.generation, 4) << History(id);
  ASSERT_EQ(r.learners.size(), 1u);
  EXPECT_EQ(r.learners[0].id, 0);
  EXPECT_THAT(History(id), HasSubstr("generation 4: shrink to 1"));
}

TEST_F(ElasticControllerTest, AShrinkLetsTheLastLearnerLeaveInPlaceAndHoldsItsNodeUntilItExits) {
  const std::string id = StartTwo();
  executor_.stopped.clear();
  const std::string other = Submit(kOther);
  controller_->Tick();
  EXPECT_TRUE(executor_.stopped.empty()) << "no learner is stopped: the last one leaves itself";
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.state, JobState::kRunning);
  EXPECT_EQ(r.attempt, 1) << "no restart";
  EXPECT_EQ(r.generation, 2);
  ASSERT_EQ(r.learners.size(), 1u);
  EXPECT_EQ(r.learners[0].id, 0);
  EXPECT_THAT(History(id), HasSubstr("generation 2: shrink to 1: a waiting job needs the idle "
                                     "capacity it grew into; learner 1 leaves at the next step "
                                     "boundary; 1 learner goes on without a restart (rank 0 is "
                                     "learner 0)"));
  // Heartbeats announce generation 2; at the next step boundary learner 0 re-forms alone and
  // learner 1, no member, is told to stop.
  EXPECT_EQ(controller_->Generation(id), 2);
  EXPECT_EQ(controller_->OnRegroup(id, 1, 1, 1)->kind, Kind::kStop);
  absl::StatusOr<RegroupDecision> d = controller_->OnRegroup(id, 0, 1, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, Kind::kReform);
  EXPECT_EQ(d->world_size, 1);
  // Until learner 1 has exited its node is not free: the other job waits.
  controller_->Tick();
  EXPECT_EQ(State(other), JobState::kQueued);
  EXPECT_EQ(executor_.launches.size(), 2u);
  executor_.Exit(id, 1, kLearnerExitStopped, 0, /*rank=*/1);
  controller_->Tick();
  controller_->Tick();
  EXPECT_NE(State(other), JobState::kQueued) << "placed once the learner left";
  EXPECT_EQ(executor_.launches.size(), 3u);
  EXPECT_EQ(State(id), JobState::kRunning) << "the leaver's exit is not a loss";
  EXPECT_EQ(store_->GetJob(id)->generation, 2);
}

TEST_F(ElasticControllerTest, ALeaverThatHangsPastTheHeartbeatTimeoutIsKilledAndItsNodeFreed) {
  const std::string id = StartTwo();
  const std::string other = Submit(kOther);
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(id)->learners.size(), 1u) << "shrunk: learner 1 leaves";
  ASSERT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kReform);
  // Learner 1 never exits; learner 0 heartbeats on.
  HeartbeatOnly(id, 0, 20);
  EXPECT_TRUE(executor_.killed.empty()) << "within the timeout the leaver is waited for";
  EXPECT_EQ(State(other), JobState::kQueued) << "its node is still held";
  HeartbeatOnly(id, 0, 61, [&] { return !executor_.killed.empty(); });
  ASSERT_EQ(executor_.killed.size(), 1u) << "the hung leaver is killed";
  EXPECT_EQ(executor_.killed[0], std::make_pair(id, 1));
  controller_->Tick();
  EXPECT_NE(State(other), JobState::kQueued) << "placed on the node the leaver held";
  EXPECT_EQ(State(id), JobState::kRunning) << "the leaver's kill is not a loss";
  EXPECT_EQ(store_->GetJob(id)->attempt, 1);
}

TEST_F(ElasticControllerTest, BelowItsMinimumTheGangRestartsLikeAFixedOne) {
  MakeController(&fair_share_);
  std::string id = Submit(R"(
name: elastic
model: {architecture: mlp}
training: {epochs: 2}
resources: {learners: {min: 2, max: 3}, cpus: 1, memory_mb: 1024}
)");
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  controller_->OnRegister(id, 1, 1, 4243, 0, {});
  executor_.stopped.clear();
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();
  EXPECT_EQ(executor_.stopped.size(), 1u) << "rank 0 is stopped to checkpoint";
  EXPECT_EQ(store_->GetJob(id)->generation, 1);
  EXPECT_EQ(controller_->OnRegroup(id, 0, 1, 1)->kind, Kind::kWait)
      << "no new generation: the survivor is being stopped";
  executor_.Exit(id, 1, 1, 0, /*rank=*/0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("learner rank 1 killed by signal 9"));
}

TEST_F(ElasticControllerTest, ARestartedWeftdAdoptsTheSurvivorsOfALossItDidNotSee) {
  const std::string id = StartTwo();
  // weftd restarts; learner 0 (pid 4242) died while none ran, learner 1 trains on.
  executor_.adoptable = {4243};
  executor_.stopped.clear();
  MakeController(&fair_share_);
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_TRUE(executor_.stopped.empty()) << "the survivor must not be stopped";
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.state, JobState::kRunning);
  EXPECT_EQ(r.attempt, 1) << "no restart";
  EXPECT_EQ(r.generation, 2);
  ASSERT_EQ(r.learners.size(), 1u);
  EXPECT_EQ(r.learners[0].id, 1);
  EXPECT_THAT(History(id), HasSubstr("generation 2: learner 0 was gone when weftd restarted (its "
                                     "exit was not seen); 1 learner goes on without a restart"));
  // The survivor, still asking to regroup from generation 1, is told its new place.
  absl::StatusOr<RegroupDecision> d = controller_->OnRegroup(id, 1, 1, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, Kind::kReform);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->generation, 2);

  // Both gone: nothing to adopt, the job is requeued as a fixed gang would be.
  executor_.adoptable = {};
  MakeController(&fair_share_);
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(id), JobState::kQueued);
}

TEST_F(ElasticControllerTest, ASilentMemberIsKilledAndItsLossIsANewGeneration) {
  const std::string id = StartTwo();
  // Learner 0 keeps heartbeating, learner 1 falls silent (hung, or stopped).
  executor_.stopped.clear();
  HeartbeatOnly(id, 0, 61, [&] { return !executor_.killed.empty(); });
  ASSERT_EQ(executor_.killed.size(), 1u) << "the silent learner is killed";
  EXPECT_EQ(executor_.killed[0], std::make_pair(id, 1));
  EXPECT_TRUE(executor_.stopped.empty()) << "the others are not stopped";
  EXPECT_EQ(State(id), JobState::kRunning);
  // Its exit (the kill) is a loss like any other, with the silence as its reason.
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->OnHeartbeat(id, 0, 1, {});
  controller_->Tick();
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.attempt, 1) << "no restart";
  EXPECT_EQ(r.generation, 2);
  EXPECT_TRUE(executor_.stopped.empty());
  EXPECT_THAT(History(id), HasSubstr("generation 2: learner 1 killed by signal 9 (SIGKILL): "
                                     "stopped heartbeating (silent 61 s), so weftd killed it; 1 "
                                     "learner goes on without a restart"));
}

TEST_F(ElasticControllerTest, ASilentMemberWhoseKillBringsNoExitStopsTheGang) {
  const std::string id = StartTwo();
  HeartbeatOnly(id, 0, 125);
  EXPECT_EQ(executor_.killed.size(), 1u) << "killed once";
  EXPECT_FALSE(executor_.stopped.empty()) << "then, with no exit, the gang is stopped";
}

}  // namespace
}  // namespace weft
