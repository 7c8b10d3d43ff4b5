// The controller with gangs (several learners per job) and the learners' credentials
// (controller_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/controller_fixture.h"
#include "control/coordinator_service.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LearnerCredentialsTest, WithoutAKeyEveryCheckFails) {
  LearnerCredentials none("");
  EXPECT_EQ(none.For("job-a", 1), "");
  EXPECT_FALSE(none.Check("job-a", 1, ""));
  EXPECT_FALSE(none.Check("job-a", 1, "anything"));
  LearnerCredentials keyed("a-secret-key");
  EXPECT_TRUE(keyed.Check("job-a", 1, keyed.For("job-a", 1)));
  EXPECT_FALSE(keyed.Check("job-a", 2, keyed.For("job-a", 1)));
  // The parameter servers' credential is another: the coordinator refuses it.
  const std::string ps = keyed.For("job-a", 1, CredentialRole::kParameterServer);
  EXPECT_EQ(ps.size(), 64u);
  EXPECT_NE(ps, keyed.For("job-a", 1));
  EXPECT_FALSE(keyed.Check("job-a", 1, ps));
}

TEST_F(ControllerTest, AShardOfAParameterServerHoldsItsRolesCredentialOnly) {
  MakeKeyedController(4, 8192);
  const std::string id = Submit(
      "name: sharded\nmodel: {architecture: mlp}\n"
      "training: {epochs: 1, threads: 1, sync: ps, ps: {servers: 2}}\n"
      "resources: {learners: 2, cpus: 1, memory_mb: 512}\n");
  controller_->Tick();
  int learners = 0, servers = 0;
  const std::string ps = controller_->credentials().For(id, 1, CredentialRole::kParameterServer);
  for (const LearnerLaunch& l : executor_.launches) {
    ASSERT_EQ(l.job_id, id);
    EXPECT_EQ(l.ps_credential, ps) << "rank " << l.rank;
    if (l.ps_server >= 0) {
      ++servers;
      EXPECT_EQ(l.credential, "") << "a shard cannot act as a learner at the coordinator";
    } else {
      ++learners;
      EXPECT_EQ(l.credential, controller_->credentials().For(id, 1));
    }
  }
  EXPECT_EQ(learners, 2);
  EXPECT_EQ(servers, 2);
}

// weftd with TLS: the attempt's shards get its TLS identity, its learners the certificate alone
// (a learner cannot pose as a shard), and the identity is the attempt's: weftd derives the same
// one again (after a restart), and another for another attempt or job.
TEST_F(ControllerTest, WithTlsTheShardsHoldTheAttemptsKeyAndItsLearnersOnlyItsCertificate) {
  MakeKeyedController(4, 8192, /*ps_tls=*/true);
  const std::string id = Submit(
      "name: sharded\nmodel: {architecture: mlp}\n"
      "training: {epochs: 1, threads: 1, sync: ps, ps: {servers: 2}}\n"
      "resources: {learners: 2, cpus: 1, memory_mb: 512}\n");
  controller_->Tick();
  auto tls = controller_->credentials().ParameterServerTls(id, 1, "weft-ps");
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_EQ(executor_.launches.size(), 4u);
  for (const LearnerLaunch& l : executor_.launches) {
    EXPECT_EQ(l.ps_tls_cert, tls->cert_pem) << "rank " << l.rank;
    EXPECT_EQ(l.ps_tls_key, l.ps_server >= 0 ? tls->key_pem : "") << "rank " << l.rank;
  }
  EXPECT_NE(controller_->credentials().ParameterServerTls(id, 2, "weft-ps")->cert_pem,
            tls->cert_pem);
  EXPECT_NE(controller_->credentials().ParameterServerTls(id + "x", 1, "weft-ps")->cert_pem,
            tls->cert_pem);
  EXPECT_FALSE(LearnerCredentials("").ParameterServerTls(id, 1, "weft-ps").ok());
}

TEST_F(ControllerTest, WithoutTlsTheShardsSpeakPlainText) {
  MakeKeyedController(4, 8192);
  Submit(
      "name: sharded\nmodel: {architecture: mlp}\n"
      "training: {epochs: 1, threads: 1, sync: ps, ps: {servers: 2}}\n"
      "resources: {learners: 2, cpus: 1, memory_mb: 512}\n");
  controller_->Tick();
  ASSERT_EQ(executor_.launches.size(), 4u);
  for (const LearnerLaunch& l : executor_.launches) {
    EXPECT_EQ(l.ps_tls_cert, "");
    EXPECT_EQ(l.ps_tls_key, "");
  }
}

TEST_F(ControllerTest, CoordinatorRefusesLearnersWithoutTheirJobsCredential) {
  MakeKeyedController();
  std::string a = Submit(), b = Submit();
  controller_->Tick();
  ASSERT_FALSE(executor_.launches.empty());
  const std::string cred_a = executor_.launches[0].credential;
  EXPECT_EQ(cred_a, controller_->credentials().For(executor_.launches[0].job_id,
                                                   executor_.launches[0].attempt));
  EXPECT_EQ(cred_a.size(), 64u);
  EXPECT_NE(controller_->credentials().For(a, 1), controller_->credentials().For(b, 1));
  // Each attempt has its own: a learner of an ended attempt is turned away.
  EXPECT_NE(controller_->credentials().For(a, 1), controller_->credentials().For(a, 2));

  CoordinatorService service(*controller_, controller_->credentials(), 1000);
  weft::v1::RegisterRequest req;
  weft::v1::RegisterResponse resp;
  req.mutable_learner()->set_job_id(executor_.launches[0].job_id);
  req.mutable_learner()->set_attempt(executor_.launches[0].attempt);
  req.mutable_learner()->set_credential("wrong");
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Another job's credential does not work either.
  const std::string other = executor_.launches[0].job_id == a ? b : a;
  req.mutable_learner()->set_credential(controller_->credentials().For(other, 1));
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Nor its own job's credential of another attempt.
  req.mutable_learner()->set_credential(controller_->credentials().For(
      executor_.launches[0].job_id, executor_.launches[0].attempt + 1));
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Nor the attempt's credential for its parameter servers.
  req.mutable_learner()->set_credential(
      controller_->credentials().For(executor_.launches[0].job_id, executor_.launches[0].attempt,
                                     CredentialRole::kParameterServer));
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  req.mutable_learner()->set_credential(cred_a);
  EXPECT_TRUE(service.Register(nullptr, &req, &resp).ok());
  EXPECT_TRUE(resp.accepted()) << resp.reason();
}

// A learner reporting metric points in a flood (a tenant's program printing metric lines in a
// loop): past its job's budget the points are dropped, evaluations last, while the report still
// goes through as a heartbeat with the learner's progress.
TEST_F(ControllerTest, AMetricFloodIsCutToTheJobsBudgetAndItsProgressStillCounts) {
  MakeKeyedController();
  const std::string id = Submit();
  controller_->Tick();
  ASSERT_EQ(executor_.launches.size(), 1u);
  CoordinatorService service(*controller_, controller_->credentials(), 1000, nullptr,
                             RateLimit{/*per second=*/0.001, /*burst=*/5});
  weft::v1::LearnerIdentity learner;
  learner.set_job_id(id);
  learner.set_attempt(1);
  learner.set_credential(controller_->credentials().For(id, 1));
  weft::v1::RegisterRequest reg;
  weft::v1::RegisterResponse registered;
  *reg.mutable_learner() = learner;
  reg.set_pid(4242);
  ASSERT_TRUE(service.Register(nullptr, &reg, &registered).ok());
  auto report = [&](int first_step, int points, int evaluation_step) {
    weft::v1::ReportMetricsRequest req;
    *req.mutable_learner() = learner;
    for (int step = first_step; step < first_step + points; ++step) {
      auto* p = req.add_points();
      p->set_step(step);
      p->set_train_loss(1.0);
      if (step == evaluation_step) p->set_test_accuracy(0.5);
    }
    req.mutable_progress()->set_step(first_step + points);
    req.mutable_progress()->set_steps_total(100000);
    weft::v1::ReportMetricsResponse resp;
    EXPECT_TRUE(service.ReportMetrics(nullptr, &req, &resp).ok());
    return resp.keep_running();
  };
  EXPECT_TRUE(report(1, 20, /*evaluation_step=*/17));
  auto page = store_->MetricRange(id, 0, 100);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->total, 5) << "the burst";
  std::vector<int64_t> steps;
  for (const MetricRecord& m : page->points) steps.push_back(m.step);
  EXPECT_THAT(steps, ::testing::ElementsAre(1, 2, 3, 4, 17)) << "the evaluation kept, in order";
  // The budget is spent: nothing more is stored, but the report still tells weftd how far the
  // learner is.
  EXPECT_TRUE(report(21, 10, -1));
  EXPECT_EQ(store_->MetricRange(id, 0, 100)->total, 5);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 31);
}

constexpr char kGang[] = R"(
name: gang
model: {architecture: mlp}
training: {epochs: 2}
resources: {learners: 2, cpus: 1, memory_mb: 1024}
)";

// A two-learner gang on the one 2-cpu node: both ranks start together, share one rendezvous
// address, and the job runs once both have registered.
TEST_F(ControllerTest, GangStartsAllLearnersAndRunsOnceAllRegister) {
  std::string id = Submit(kGang);
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(executor_.launches.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const LearnerLaunch& l = executor_.launches[rank];
    EXPECT_EQ(l.rank, rank);
    EXPECT_EQ(l.world_size, 2);
    EXPECT_EQ(l.node, "local");
    EXPECT_EQ(l.rendezvous_host, "127.0.0.1");
    EXPECT_EQ(l.rendezvous_port, 29400);
    EXPECT_EQ(l.learners_as_one, 1) << "this executor does not run a gang as one learner";
  }
  JobRecord r = *store_->GetJob(id);
  ASSERT_EQ(r.learners.size(), 2u);
  EXPECT_EQ(r.learners[0].pid, 4242);
  EXPECT_EQ(r.learners[1].pid, 4243);
  EXPECT_THAT(store_->History(id)->at(1).reason, HasSubstr("placed 2 learners on node local"));

  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0, {}).accepted);
  EXPECT_EQ(State(id), JobState::kStarting) << "rank 1 has not registered yet";
  EXPECT_FALSE(controller_->OnRegister(id, 2, 1, 99, 0, {}).accepted) << "no rank 2 in a gang of 2";
  RegisterDecision wrong_world = controller_->OnRegister(id, 1, 1, 4243, /*world_size=*/3, {});
  EXPECT_FALSE(wrong_world.accepted);
  EXPECT_THAT(wrong_world.reason, HasSubstr("started for a gang of 3; the job has 2"));
  EXPECT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 0, {}).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_THAT(Reason(id), HasSubstr("all 2 learners registered (pids 4242, 4243)"));

  // Only rank 0's progress is the job's.
  EXPECT_EQ(controller_->OnHeartbeat(id, 1, 1, JobProgress{0, 2, 999, 1000, 1}),
            ReportAnswer::kKeepRunning);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 0);
  EXPECT_EQ(controller_->OnHeartbeat(id, 0, 1, JobProgress{0, 2, 10, 1000, 1}),
            ReportAnswer::kKeepRunning);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 10);

  // Rank 1 finishing first changes nothing; rank 0's success completes the job.
  EXPECT_TRUE(controller_->OnFinished(id, 1, 1, true, "rank 1 of 2 done").ok());
  executor_.Exit(id, 1, 0, 0, /*rank=*/1);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  ASSERT_TRUE(controller_->OnCommitModel(id, 1, Model(id, "final", 0.85)).ok());
  EXPECT_TRUE(
      controller_->OnFinished(id, 0, 1, true, "budget exhausted: 2 epochs, test_accuracy 0.8500")
          .ok());
  executor_.Exit(id, 1, 0, 0, /*rank=*/0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(Reason(id), "budget exhausted: 2 epochs, test_accuracy 0.8500");
  EXPECT_TRUE(store_->GetJob(id)->learners.empty());
}

// Where the executor can run it, a gang all on one node trains as one learner: every rank is
// told so, rank 0 gets the gang's threads and memory, and the history says why. With
// resources.gang_on_one_host: learners, or an executor that cannot, it is a gang as above.
TEST_F(ControllerTest, AGangOnOneNodeStartsAsOneLearnerWhereTheExecutorCan) {
  executor_.as_one = true;
  std::string id = Submit(kGang);
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(executor_.launches.size(), 2u);
  for (const LearnerLaunch& l : executor_.launches) {
    EXPECT_EQ(l.learners_as_one, 2);
    EXPECT_EQ(l.world_size, 2) << "the gang's size, which registration checks";
  }
  EXPECT_EQ(executor_.launches[0].threads, 2);
  EXPECT_EQ(executor_.launches[0].memory_limit_mb, 2048);
  EXPECT_EQ(executor_.launches[1].threads, 1);
  EXPECT_EQ(executor_.launches[1].memory_limit_mb, 1024);
  EXPECT_THAT(Reason(id), HasSubstr("all 2 on node local, so rank 0 trains for the gang as one "
                                    "learner (2 threads, batch 128"));
  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 2, {}).accepted);
  EXPECT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 2, {}).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(ControllerTest, AGangOnOneNodeThatAsksToStayAGangDoes) {
  executor_.as_one = true;
  std::string id = Submit(
      "name: gang\nmodel: {architecture: mlp}\ntraining: {epochs: 2}\n"
      "resources: {learners: 2, cpus: 1, memory_mb: 1024, gang_on_one_host: learners}\n");
  controller_->Tick();
  ASSERT_EQ(executor_.launches.size(), 2u);
  for (const LearnerLaunch& l : executor_.launches) {
    EXPECT_EQ(l.learners_as_one, 1);
    EXPECT_EQ(l.threads, 1);
  }
  EXPECT_THAT(Reason(id), ::testing::Not(HasSubstr("as one learner")));
}

TEST_F(ControllerTest, OneDeadLearnerStopsTheGangAndRestartsTheJob) {
  std::string id = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  controller_->OnRegister(id, 1, 1, 4243, 0, {});
  executor_.stopped.clear();
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();
  // Rank 0 is told to stop, with the grace to checkpoint the last step both ranks completed; the
  // job waits for it.
  ASSERT_EQ(executor_.stopped.size(), 1u);
  EXPECT_EQ(executor_.stopped[0], id);
  EXPECT_EQ(State(id), JobState::kRunning);
  std::string dir = controller_->layout().JobDir(id) + "/checkpoints";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(CheckpointPath(dir, 77), "0123456789").ok());
  EXPECT_TRUE(
      controller_->OnCommitCheckpoint(id, 1, {77, 0, CheckpointPath(dir, 77), 10, 0, 0}).ok());
  // Rank 0 exits (its allreduce failed): the gang restarts from that checkpoint, with the reason
  // of the learner that died.
  executor_.Exit(id, 1, 1, 0, /*rank=*/0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("learner rank 1 killed by signal 9"));
  EXPECT_THAT(Reason(id), HasSubstr("restart 1 of 3 from the checkpoint at step 77"));
  EXPECT_EQ(executor_.Running(id), 0);
  clock_.Advance(1000);
  controller_->Tick();
  ASSERT_EQ(State(id), JobState::kStarting) << "the whole gang restarts";
  EXPECT_EQ(executor_.launches.size(), 4u);
  EXPECT_EQ(executor_.launches[2].attempt, 2);
  EXPECT_EQ(executor_.launches[3].rank, 1);
}

// In a container the engine may report a killed learner after its peer, which exited because
// its allreduce failed: the killed one is still named as the cause. A SIGKILL once the stop's
// grace is over is the executor's own and names nothing.
class GangCauseTest : public ControllerTest {
 protected:
  // The reason job's restart gives when rank 0 ends first — exit code 1, or killed by
  // `rank0_signal` (SIGPIPE: writing to its lost peer) — and rank 1 is reaped, killed by SIGKILL,
  // `after_ms` later.
  std::string ReasonWhenRank1IsReapedLast(TimeMs after_ms, int rank0_signal = 0) {
    std::string id = Submit(kGang);
    controller_->Tick();
    controller_->OnRegister(id, 0, 1, 4242, 0, {});
    controller_->OnRegister(id, 1, 1, 4243, 0, {});
    executor_.Exit(id, 1, rank0_signal == 0 ? 1 : -1, rank0_signal, /*rank=*/0);
    controller_->Tick();
    EXPECT_EQ(State(id), JobState::kRunning) << "waiting for rank 1";
    clock_.Advance(after_ms);
    executor_.Exit(id, 1, -1, 9, /*rank=*/1);
    controller_->Tick();
    EXPECT_EQ(State(id), JobState::kQueued);
    return Reason(id);
  }
};

TEST_F(GangCauseTest, AKilledLearnerReapedAfterItsPeerIsStillTheCause) {
  EXPECT_THAT(ReasonWhenRank1IsReapedLast(500), HasSubstr("learner rank 1 killed by signal 9"));
}

TEST_F(GangCauseTest, APeerKilledBySigpipeWritingToTheLostLearnerIsNotTheCause) {
  EXPECT_THAT(ReasonWhenRank1IsReapedLast(500, SIGPIPE),
              HasSubstr("learner rank 1 killed by signal 9"));
}

TEST_F(GangCauseTest, AKillOnceTheStopGraceIsOverIsTheExecutorsOwn) {
  const std::string reason = ReasonWhenRank1IsReapedLast(ControllerOptions{}.stop_grace_ms);
  EXPECT_THAT(reason, HasSubstr("learner exit code 1"));
  EXPECT_THAT(reason, Not(HasSubstr("rank 1")));
}

// A parameter-server job (training.sync: ps) whose rank 1 dies: only that learner is started
// again, in the same attempt, the others never stopped; after max_restarts replacements, and for
// rank 0 (the server's process) at once, the gang stops and restarts as any other.
TEST_F(ControllerTest, AParameterServerJobReplacesALostLearnerAloneUpToMaxRestarts) {
  std::string id = Submit(R"(
name: ps
model: {architecture: mlp}
training: {epochs: 2, sync: ps}
resources: {learners: 2, cpus: 1, memory_mb: 1024}
max_restarts: 1
)");
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  controller_->OnRegister(id, 1, 1, 4243, 0, {});
  ASSERT_EQ(State(id), JobState::kRunning);
  // Rank 0 hosts the server's segment; the executor is told to remove it should rank 0 leave it.
  ASSERT_EQ(executor_.launches.size(), 2u);
  EXPECT_EQ(executor_.launches[0].leftover_shm, "/weft-ps-" + id + "-1");
  EXPECT_EQ(executor_.launches[1].leftover_shm, "");
  executor_.stopped.clear();
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();
  EXPECT_TRUE(executor_.stopped.empty()) << "rank 0 trains on";
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_THAT(Reason(id), HasSubstr("learner 1 killed by signal 9"));
  EXPECT_THAT(Reason(id), HasSubstr("learner 1 replaced"));
  ASSERT_EQ(executor_.launches.size(), 3u);
  EXPECT_EQ(executor_.launches[2].rank, 1);
  EXPECT_EQ(executor_.launches[2].attempt, 1) << "the same attempt";
  EXPECT_EQ(executor_.Running(id), 2);
  // The replacement registers like its predecessor; a second loss is past max_restarts (1).
  controller_->OnRegister(id, 1, 1, 4244, 0, {});
  executor_.Exit(id, 1, -1, 9, /*rank=*/1);
  controller_->Tick();
  ASSERT_EQ(executor_.stopped.size(), 1u) << "the gang stops";
  EXPECT_EQ(executor_.launches.size(), 3u);
  executor_.Exit(id, 1, 1, 0, /*rank=*/0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_EQ(store_->GetJob(id)->restarts, 1);
}

TEST_F(ControllerTest, ASilentRankRestartsTheGang) {
  std::string id = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0, {});
  controller_->OnRegister(id, 1, 1, 4243, 0, {});
  // Rank 0 keeps heartbeating, rank 1 falls silent (hung or stopped).
  HeartbeatOnly(id, 0, 61);
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("learner rank 1 stopped heartbeating"));
}

TEST_F(ControllerTest, RecoverAdoptsAWholeGangOrRequeuesIt) {
  std::string whole = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(whole, 0, 1, 4242, 0, {});
  controller_->OnRegister(whole, 1, 1, 4243, 0, {});
  executor_.adoptable = {4242, 4243};
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(whole), JobState::kRunning);
  ASSERT_EQ(executor_.adopted.size(), 2u);
  EXPECT_EQ(executor_.adopted[1].rank, 1);

  // Now rank 1 is gone when weftd restarts: rank 0 cannot train alone.
  executor_.adopted.clear();
  executor_.stopped.clear();
  executor_.adoptable = {4242};
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(whole), JobState::kQueued);
  EXPECT_THAT(Reason(whole), HasSubstr("gone after a weftd restart"));
  EXPECT_EQ(executor_.adopted.size(), 1u);
  ASSERT_EQ(executor_.stopped.size(), 1u) << "the adopted rank 0 is stopped";
}

}  // namespace
}  // namespace weft
