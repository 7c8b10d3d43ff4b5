// GPUs in the controller (controller_fixture.h, the fake executor): each learner is started with
// its own devices, a job that cannot get any waits saying so, a tenant over its GPU quota waits,
// a learner handed other devices ends its attempt (unless the executor chooses them: Slurm), a
// restarted weftd adopts learners with their devices, and a job's GPU time is counted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/artifacts.h"
#include "control/controller_fixture.h"
#include "scheduler/fair_share_policy.h"

namespace weft {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpuJob[] = R"(
name: g
command: [python3, train.py]
code: code
resources: {cpus: 1, memory_mb: 512, gpus: 1}
)";

class ControllerGpuTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    TenantRecord t;
    t.name = "default";
    ASSERT_TRUE(store_->CreateTenant(t).ok());
    artifacts_ = std::make_unique<Artifacts>(*store_, env_, dir_, clock_);
    auto upload = artifacts_->Begin("default", "code", -1);
    ASSERT_TRUE(upload.ok());
    ASSERT_TRUE((*upload)->Append("not really a tar.gz").ok());
    ASSERT_TRUE(artifacts_->Commit(*std::move(upload)).ok());
    adjust_options_ = [this](ControllerOptions& o) {
      scheduler::Node n;
      n.name = "gpu-node";
      n.capacity = {8, 32768, 2};
      n.gpu_devices = {{0, "weft.test/gpu=0", "fake"}, {1, "weft.test/gpu=1", "fake"}};
      o.nodes = {n};
      o.artifacts = artifacts_.get();
    };
    MakeController();
  }
  // Submits `manifest` a millisecond after the previous one, so the queue's order is theirs.
  std::string SubmitNext(const std::string& manifest = kGpuJob) {
    clock_.Advance(1);
    return Submit(manifest);
  }
  // The launch of job `id`'s learner (the latest one).
  const LearnerLaunch* LaunchOf(const std::string& id) const {
    const LearnerLaunch* out = nullptr;
    for (const LearnerLaunch& l : executor_.launches) {
      if (l.job_id == id) out = &l;
    }
    return out;
  }

  std::unique_ptr<Artifacts> artifacts_;
  scheduler::FairSharePolicy fair_share_;
};

TEST_F(ControllerGpuTest, TwoJobsGetTheirOwnDevicesAndAThirdWaitsForAGpu) {
  const std::string a = SubmitNext(), b = SubmitNext(), c = SubmitNext();
  controller_->Tick();
  ASSERT_EQ(State(a), JobState::kStarting);
  ASSERT_EQ(State(b), JobState::kStarting);
  EXPECT_EQ(State(c), JobState::kQueued);
  EXPECT_THAT(WaitingReason(c), HasSubstr("gpus"));
  const LearnerLaunch *la = LaunchOf(a), *lb = LaunchOf(b);
  ASSERT_NE(la, nullptr);
  ASSERT_NE(lb, nullptr);
  EXPECT_EQ(la->gpus.size(), 1u);
  EXPECT_EQ(lb->gpus.size(), 1u);
  EXPECT_NE(la->gpus, lb->gpus);
  EXPECT_THAT(la->gpu_devices, ElementsAre("weft.test/gpu=" + std::to_string(la->gpus[0])));
  // The store holds who has which device: the learners' records.
  EXPECT_EQ(store_->GetJob(a)->learners[0].gpus, la->gpus);
  EXPECT_EQ(store_->GetJob(b)->learners[0].gpus, lb->gpus);
  // The view the API shows: both devices held.
  auto nodes = controller_->view().Nodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[0].node.gpus_held.size(), 2u);
}

TEST_F(ControllerGpuTest, ATenantOverItsGpuQuotaWaitsSayingSo) {
  TenantRecord t = *store_->GetTenant("default");
  t.has_quota = true;
  t.quota_cpus = 8;
  t.quota_memory_mb = 32768;
  t.quota_gpus = 1;
  ASSERT_TRUE(store_->UpdateTenant(t).ok());
  MakeController(&fair_share_);  // the policy that holds tenants to their quotas
  const std::string a = SubmitNext(), b = SubmitNext();
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kStarting);
  EXPECT_EQ(State(b), JobState::kQueued);
  EXPECT_THAT(WaitingReason(b), HasSubstr("quota"));
  EXPECT_THAT(WaitingReason(b), HasSubstr("gpus 1/1"));
}

TEST_F(ControllerGpuTest, ALearnerHandedOtherDevicesEndsItsAttemptSayingWhich) {
  const std::string id = SubmitNext();
  controller_->Tick();
  const std::vector<int> placed = LaunchOf(id)->gpus;
  const std::vector<int> other = {placed[0] == 0 ? 1 : 0};
  RegisterDecision d = controller_->OnRegister(id, 0, 1, 4242, 1, other);
  EXPECT_FALSE(d.accepted);
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("was handed GPUs [" + std::to_string(other[0]) + "]"));
  EXPECT_THAT(Reason(id), HasSubstr("weft placed it on [" + std::to_string(placed[0]) + "]"));
  EXPECT_THAT(executor_.stopped, ElementsAre(id));
  // Its devices are free again: the next round can start it.
  EXPECT_TRUE(store_->GetJob(id)->learners.empty());
}

TEST_F(ControllerGpuTest, WhereTheExecutorChoosesTheDevicesTheLearnersReportIsRecorded) {
  executor_.chooses_gpus = true;
  const std::string id = SubmitNext();
  controller_->Tick();
  const int placed = LaunchOf(id)->gpus[0];
  ASSERT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 1, {1 - placed}).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_THAT(store_->GetJob(id)->learners[0].gpus, ElementsAre(1 - placed));
  // But not a report of the wrong number of devices.
  const std::string other = SubmitNext();
  controller_->Tick();
  EXPECT_FALSE(controller_->OnRegister(other, 0, 1, 4243, 1, {0, 1}).accepted);
  EXPECT_THAT(Reason(other), HasSubstr("(it needs 1)"));
}

TEST_F(ControllerGpuTest, ARestartedWeftdAdoptsTheLearnersWithTheirDevices) {
  const std::string a = SubmitNext(), b = SubmitNext();
  controller_->Tick();
  const std::vector<int> ga = LaunchOf(a)->gpus, gb = LaunchOf(b)->gpus;
  ASSERT_TRUE(controller_->OnRegister(a, 0, 1, 4242, 1, ga).accepted);
  ASSERT_TRUE(controller_->OnRegister(b, 0, 1, 4243, 1, gb).accepted);
  executor_.adoptable = {4242, 4243};
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  ASSERT_EQ(executor_.adopted.size(), 2u);
  for (const LearnerLaunch& l : executor_.adopted) {
    EXPECT_EQ(l.gpus, l.job_id == a ? ga : gb) << l.job_id;
  }
  // Both devices stay held: a new job waits.
  const std::string c = SubmitNext();
  controller_->Tick();
  EXPECT_EQ(State(c), JobState::kQueued);
  EXPECT_THAT(WaitingReason(c), HasSubstr("gpus"));
}

TEST_F(ControllerGpuTest, AJobsGpuTimeCountsFromPlacementToTheEndOfItsAttempt) {
  const std::string id = SubmitNext();
  controller_->Tick();
  const std::vector<int> gpus = LaunchOf(id)->gpus;
  ASSERT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 1, gpus).accepted);
  clock_.Advance(10'000);
  EXPECT_EQ(store_->GetJob(id)->GpuMs(clock_.NowMs()), 10'000);
  ASSERT_TRUE(controller_->Halt(id).ok());  // the attempt ends: its learner leaves the job
  clock_.Advance(5'000);
  JobRecord r = *store_->GetJob(id);
  EXPECT_EQ(r.gpu_ms, 10'000);
  EXPECT_EQ(r.GpuMs(clock_.NowMs()), 10'000) << "nothing counts while it holds no device";
  auto usage = controller_->view().Usage(clock_.NowMs());
  ASSERT_TRUE(usage.ok());
  for (const auto& u : *usage) {
    if (u.tenant.name == "default") {
      EXPECT_EQ(u.gpu_ms, 10'000);
    }
  }
  // Deleted, the time stays the tenant's.
  ASSERT_TRUE(controller_->Delete(id).ok());
  EXPECT_EQ(store_->GetTenant("default")->deleted_jobs_gpu_ms, 10'000);
}

}  // namespace
}  // namespace weft
