// The controller against a real SQLite store, the real FIFO policy, a fake executor (no
// processes) and a manual clock, so every lifecycle path is driven step by step.
#include "control/controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <fstream>

#include "common/files.h"
#include "job/layout.h"
#include "control/coordinator_service.h"
#include "store/sqlite_store.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

class ManualClock : public Clock {
 public:
  TimeMs NowMs() const override { return now_; }
  void Advance(TimeMs ms) { now_ += ms; }

 private:
  TimeMs now_ = 1'700'000'000'000;
};

class FakeExecutor : public Executor {
 public:
  absl::StatusOr<int64_t> Start(const LearnerLaunch& l) override {
    launches.push_back(l);
    running[l.job_id].insert(l.rank);
    return 4242 + l.rank;
  }
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override {
    stopped.push_back(job_id);
    if (grace_ms <= 0) running.erase(job_id);
    return absl::OkStatus();
  }
  std::vector<LearnerExit> Reap() override {
    std::vector<LearnerExit> out;
    out.swap(exits);
    for (const auto& e : out) {
      running[e.job_id].erase(e.rank);
      if (running[e.job_id].empty()) running.erase(e.job_id);
    }
    return out;
  }
  int Running(const std::string& job_id) override {
    auto it = running.find(job_id);
    return it == running.end() ? 0 : static_cast<int>(it->second.size());
  }
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string&) override {
    return std::make_pair(std::string("127.0.0.1"), 29400);
  }
  absl::Status Adopt(const LearnerLaunch& l, int64_t pid) override {
    if (!adoptable.count(pid)) return absl::NotFoundError("no such learner");
    adopted.push_back(l);
    running[l.job_id].insert(l.rank);
    return absl::OkStatus();
  }
  std::set<int64_t> adoptable;  // pids Adopt() accepts
  std::vector<LearnerLaunch> adopted;

  void Exit(const std::string& job, int64_t attempt, int code, int signal = 0, int rank = 0) {
    LearnerExit e;
    e.job_id = job;
    e.attempt = attempt;
    e.rank = rank;
    e.exit_code = code;
    e.signal = signal;
    exits.push_back(e);
  }

  std::vector<LearnerLaunch> launches;
  std::vector<std::string> stopped;
  std::vector<LearnerExit> exits;
  std::map<std::string, std::set<int>> running;  // ranks not yet exited, by job
};

constexpr char kManifest[] = R"(
name: t
model: {architecture: mlp}
training: {epochs: 2}
resources: {cpus: 2, memory_mb: 1024}
targets: {deliver: 0.8, complete: 0.9}
)";

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-controller-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(*SqliteStore::Open(dir_ + "/weft.db"));
    MakeController();
  }
  void TearDown() override {
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void MakeController() {
    ControllerOptions o;
    o.data_dir = dir_;
    o.nodes = {scheduler::Node{"local", {2, 4096, 0}, {}}};
    o.coordinator_address = "127.0.0.1:9";
    controller_ = std::make_unique<Controller>(*store_, executor_, policy_, clock_, o);
  }
  std::string Submit(const std::string& manifest = kManifest) {
    std::vector<FieldError> errors;
    auto job = controller_->Submit(manifest, "default", &errors);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id : "";
  }
  JobState State(const std::string& id) { return store_->GetJob(id)->state; }
  std::string WaitingReason(const std::string& id) {
    auto w = controller_->view().WaitingFor(id);
    return w ? w->reason : "";
  }
  std::string Reason(const std::string& id) { return store_->GetJob(id)->reason; }
  // Writes a model file of the job and returns its artifact record.
  ArtifactRecord Model(const std::string& id, const std::string& kind, double acc) {
    std::string path = controller_->layout().JobDir(id) + "/results/" + kind + "/model.pt";
    EXPECT_TRUE(MakeDirs(controller_->layout().JobDir(id) + "/results/" + kind).ok());
    EXPECT_TRUE(WriteFileAtomic(path, "model-bytes").ok());
    return ArtifactRecord{kind, path, ModelCardPath(controller_->layout().ResultDir(id), kind), acc,
                          1, 10, 11, 0};
  }

  std::string dir_;
  ManualClock clock_;
  FakeExecutor executor_;
  scheduler::FifoPolicy policy_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, HappyPathThroughDeliveredToCompleted) {
  std::string id = Submit();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_TRUE(std::filesystem::exists(controller_->layout().JobDir(id) + "/spec.json"));
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  ASSERT_EQ(executor_.launches.size(), 1u);
  const LearnerLaunch& l = executor_.launches[0];
  EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(l.threads, 2);
  EXPECT_EQ(l.coordinator_address, "127.0.0.1:9");
  ASSERT_EQ(store_->GetJob(id)->learners.size(), 1u);
  EXPECT_EQ(store_->GetJob(id)->learners[0].pid, 4242);
  EXPECT_EQ(store_->GetJob(id)->learners[0].node, "local");

  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
  JobProgress p{1, 2, 10, 20, 640};
  MetricRecord m;
  m.step = 10;
  m.test_accuracy = 0.85;
  EXPECT_TRUE(controller_->OnMetrics(id, 0, 1, {m}, p));
  EXPECT_DOUBLE_EQ(*store_->GetJob(id)->best_test_accuracy, 0.85);
  EXPECT_EQ(store_->GetJob(id)->progress.step, 10);

  ASSERT_TRUE(controller_->OnCommitArtifact(id, 1, Model(id, "delivered", 0.85)).ok());
  EXPECT_EQ(State(id), JobState::kDelivered);
  EXPECT_THAT(Reason(id), HasSubstr("deliver target met: test_accuracy 0.8500 >= 0.8"));
  EXPECT_TRUE(store_->GetJob(id)->deliver_met_ms.has_value());

  ASSERT_TRUE(controller_->OnCommitArtifact(id, 1, Model(id, "final", 0.91)).ok());
  EXPECT_TRUE(store_->GetJob(id)->complete_met_ms.has_value());
  controller_->OnFinished(id, 0, 1, true, "target met: test_accuracy 0.9100 >= 0.9");
  executor_.Exit(id, 1, 0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(Reason(id), "target met: test_accuracy 0.9100 >= 0.9");
  EXPECT_EQ(store_->History(id)->size(), 6u);
  EXPECT_TRUE(store_->GetJob(id)->learners.empty());
}

TEST_F(ControllerTest, SecondJobWaitsWithAReasonUntilTheFirstEnds) {
  std::string a = Submit();
  clock_.Advance(1);
  std::string b = Submit();
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kStarting);
  EXPECT_EQ(State(b), JobState::kQueued);
  EXPECT_THAT(WaitingReason(b), HasSubstr("waiting: no free node has 2 cpus"));
  executor_.Exit(a, 1, 1);
  controller_->Tick();
  EXPECT_EQ(State(a), JobState::kQueued) << "restarting after backoff";
  EXPECT_EQ(State(b), JobState::kStarting);
  EXPECT_EQ(WaitingReason(b), "");
}

TEST_F(ControllerTest, ExitWithoutSuccessFailsWithTheLearnersReason) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  controller_->OnFinished(id, 0, 1, false, "data file not found: /nope/train-images-idx3-ubyte");
  executor_.Exit(id, 1, 2);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(Reason(id), "learner exit code 2: data file not found: /nope/train-images-idx3-ubyte");
}

TEST_F(ControllerTest, CleanExitWithoutFinalModelFails) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  controller_->OnFinished(id, 0, 1, true, "done");
  executor_.Exit(id, 1, 0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(Reason(id), HasSubstr("without committing a final model"));
}

TEST_F(ControllerTest, KilledLearnerRestartsWithBackoffUntilMaxRestarts) {
  std::string id = Submit(std::string(kManifest) + "max_restarts: 2\n");
  for (int attempt = 1; attempt <= 3; ++attempt) {
    controller_->Tick();
    ASSERT_EQ(State(id), JobState::kStarting) << "attempt " << attempt;
    EXPECT_EQ(executor_.launches.back().attempt, attempt);
    controller_->OnRegister(id, 0, attempt, 1, 0);
    executor_.Exit(id, attempt, -1, 9);
    controller_->Tick();
    if (attempt == 3) break;
    EXPECT_EQ(State(id), JobState::kQueued);
    EXPECT_THAT(Reason(id), HasSubstr("killed by signal 9"));
    EXPECT_THAT(Reason(id), HasSubstr("restart " + std::to_string(attempt) + " of 2"));
    // Backoff: 1 s, then 2 s; the job waits with a reason meanwhile.
    int64_t backoff = 1000 << (attempt - 1);
    clock_.Advance(backoff - 100);
    controller_->Tick();
    EXPECT_EQ(State(id), JobState::kQueued);
    EXPECT_THAT(WaitingReason(id), HasSubstr("restart backoff"));
    clock_.Advance(100);
  }
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_THAT(Reason(id), HasSubstr("gave up after 2 restarts"));
  EXPECT_EQ(store_->GetJob(id)->restarts, 2);
}

TEST_F(ControllerTest, CheckpointsAreKeptPerSpecAndHandedToTheNextAttempt) {
  std::string id = Submit(std::string(kManifest) + "checkpoint: {keep: 2}\n");
  controller_->Tick();
  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 1, 0).resume_from.empty());
  std::string dir = controller_->layout().JobDir(id) + "/checkpoints";
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::vector<std::string> paths;
  for (int step : {100, 200, 300}) {
    std::string p = CheckpointPath(dir, step);
    ASSERT_TRUE(WriteFileAtomic(p, "0123456789").ok());
    paths.push_back(p);
    ASSERT_TRUE(controller_->OnCommitCheckpoint(id, 1, {step, 1, p, 10, 0}).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(paths[0])) << "only `keep` checkpoints stay";
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  EXPECT_EQ(store_->Checkpoints(id)->size(), 2u);
  // Refused: wrong size, a path that is not the one weftd derives for that step (another step's
  // file, a file outside the job, a way out of the job's directory), stale attempt.
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitCheckpoint(id, 1, {300, 1, paths[2], 5, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitCheckpoint(id, 1, {400, 1, paths[2], 10, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitCheckpoint(id, 1, {400, 1, "/etc/hosts", 10, 0})));
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitCheckpoint(
      id, 1, {400, 1, dir + "/../../other/checkpoints/ckpt-0000000400.pt", 10, 0})));
  EXPECT_TRUE(absl::IsFailedPrecondition(controller_->OnCommitCheckpoint(id, 9, {300, 1, paths[2], 10, 0})));
  EXPECT_EQ(store_->Checkpoints(id)->size(), 2u);

  executor_.Exit(id, 1, 1);
  controller_->Tick();
  EXPECT_THAT(Reason(id), HasSubstr("from the checkpoint at step 300"));
  clock_.Advance(1000);
  controller_->Tick();
  RegisterDecision d = controller_->OnRegister(id, 0, 2, 1, 0);
  ASSERT_TRUE(d.accepted);
  EXPECT_EQ(d.resume_from, (std::vector<std::string>{paths[2], paths[1]}));
}

TEST_F(ControllerTest, HaltedLearnerMayCommitItsLastCheckpoint) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  ASSERT_TRUE(controller_->Halt(id).ok());
  std::string p = CheckpointPath(controller_->layout().CheckpointDir(id), 7);
  ASSERT_TRUE(MakeDirs(controller_->layout().JobDir(id) + "/checkpoints").ok());
  ASSERT_TRUE(WriteFileAtomic(p, "abc").ok());
  EXPECT_TRUE(controller_->OnCommitCheckpoint(id, 1, {7, 0, p, 3, 0}).ok());
  ASSERT_TRUE(controller_->Resume(id).ok());
  controller_->Tick();
  EXPECT_EQ(controller_->OnRegister(id, 0, 2, 1, 0).resume_from, (std::vector<std::string>{p}));
}

TEST_F(ControllerTest, StaleAttemptsAreFencedOff) {
  std::string id = Submit();
  controller_->Tick();
  EXPECT_FALSE(controller_->OnRegister(id, 0, /*attempt=*/7, 1, 0).accepted);
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_FALSE(controller_->OnMetrics(id, 0, 7, {}, {}));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      controller_->OnCommitArtifact(id, 7, Model(id, "delivered", 0.99))));
  EXPECT_TRUE(store_->Artifacts(id)->empty());
  EXPECT_FALSE(controller_->OnRegister("job-unknown", 0, 1, 1, 0).accepted);
}

TEST_F(ControllerTest, ArtifactMustExistWithTheClaimedSizeInsideTheJob) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  ArtifactRecord a = Model(id, "final", 0.5);
  a.bytes = 999;
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitArtifact(id, 1, a)));
  a = Model(id, "final", 0.5);
  a.path = "/etc/passwd";
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitArtifact(id, 1, a)));
  a = Model(id, "weights", 0.5);
  EXPECT_TRUE(absl::IsInvalidArgument(controller_->OnCommitArtifact(id, 1, a)));
  EXPECT_TRUE(store_->Artifacts(id)->empty());
}

TEST_F(ControllerTest, SilentLearnerIsStoppedAndFailed) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  clock_.Advance(30'000);
  EXPECT_TRUE(controller_->OnHeartbeat(id, 0, 1, {}));
  clock_.Advance(59'000);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  clock_.Advance(2'000);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("stopped heartbeating"));
  EXPECT_THAT(Reason(id), HasSubstr("restart 1 of 3 from the beginning"));
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
}

TEST_F(ControllerTest, HaltResumeAndTheLearnerIsToldToStop) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 1, 0);
  ASSERT_TRUE(controller_->Halt(id).ok());
  EXPECT_EQ(State(id), JobState::kHalted);
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
  EXPECT_FALSE(controller_->OnHeartbeat(id, 0, 1, {}));
  EXPECT_TRUE(absl::IsFailedPrecondition(controller_->Halt(id)));
  executor_.Exit(id, 1, 143);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kHalted) << "the exit of a halted job changes nothing";
  ASSERT_TRUE(controller_->Resume(id).ok());
  EXPECT_EQ(State(id), JobState::kQueued);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kStarting);
  EXPECT_EQ(executor_.launches.back().attempt, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(controller_->Resume(id)));
  EXPECT_TRUE(absl::IsNotFound(controller_->Halt("job-nope")));
}

TEST_F(ControllerTest, RecoverRequeuesJobsThatHeldResources) {
  std::string running = Submit();
  controller_->Tick();
  controller_->OnRegister(running, 0, 1, 1, 0);
  clock_.Advance(1000);
  std::string queued = Submit();
  // weftd "restarts": a new controller over the same store.
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(running), JobState::kQueued);
  EXPECT_THAT(Reason(running), HasSubstr("gone after a weftd restart"));
  EXPECT_THAT(Reason(running), HasSubstr("resumes from its latest checkpoint"));
  EXPECT_EQ(State(queued), JobState::kQueued);
  controller_->Tick();
  // The requeued job keeps its place in the queue: it was submitted first.
  EXPECT_EQ(State(running), JobState::kStarting);
  EXPECT_EQ(State(queued), JobState::kQueued);
  EXPECT_EQ(store_->GetJob(running)->attempt, 2);
  // The learner of attempt 1 is fenced off.
  EXPECT_FALSE(controller_->OnRegister(running, 0, 1, 1, 0).accepted);
}

TEST_F(ControllerTest, RecoverAdoptsALiveLearnerOfTheCurrentAttempt) {
  std::string id = Submit();
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0);
  executor_.adoptable.insert(4242);
  MakeController();
  ASSERT_TRUE(controller_->Recover().ok());
  EXPECT_EQ(State(id), JobState::kRunning) << "adopted, not requeued";
  ASSERT_EQ(executor_.adopted.size(), 1u);
  EXPECT_EQ(executor_.adopted[0].attempt, 1);
  EXPECT_TRUE(controller_->OnHeartbeat(id, 0, 1, {}));
  // It finishes under the new weftd; its exit status is unknown but its report decides.
  ASSERT_TRUE(controller_->OnCommitArtifact(id, 1, Model(id, "final", 0.95)).ok());
  controller_->OnFinished(id, 0, 1, true, "target met: test_accuracy 0.9500 >= 0.9");
  LearnerExit e;
  e.job_id = id;
  e.attempt = 1;
  e.status_unknown = true;
  executor_.exits.push_back(e);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(executor_.launches.size(), 1u) << "never a second copy";
}

TEST_F(ControllerTest, DeleteRemovesTheJobAndItsFiles) {
  std::string id = Submit();
  controller_->Tick();
  std::string dir = controller_->layout().JobDir(id);
  ASSERT_TRUE(std::filesystem::exists(dir));
  ASSERT_TRUE(controller_->Delete(id).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->GetJob(id).status()));
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_EQ(executor_.stopped, (std::vector<std::string>{id}));
  EXPECT_TRUE(absl::IsNotFound(controller_->Delete(id)));
}

TEST_F(ControllerTest, RejectsNeverFittingRequestsAndStoresNothing) {
  std::vector<FieldError> errors;
  auto job = controller_->Submit(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\nresources: {cpus: 3}\n",
      "default", &errors);
  EXPECT_TRUE(absl::IsInvalidArgument(job.status()));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "resources");
  EXPECT_THAT(errors[0].problem, HasSubstr("needs 3 cpus per learner, the largest node has 2"));
  EXPECT_TRUE(store_->ListJobs("")->empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/jobs") &&
               !std::filesystem::is_empty(dir_ + "/jobs"));
}

}  // namespace
TEST_F(ControllerTest, CoordinatorRefusesLearnersWithoutTheirJobsCredential) {
  ControllerOptions o;
  o.data_dir = dir_;
  o.nodes = {scheduler::Node{"local", {2, 4096, 0}, {}}};
  o.coordinator_address = "127.0.0.1:9";
  o.learner_key = "a-secret-key";
  controller_ = std::make_unique<Controller>(*store_, executor_, policy_, clock_, o);
  std::string a = Submit(), b = Submit();
  controller_->Tick();
  ASSERT_FALSE(executor_.launches.empty());
  const std::string cred_a = executor_.launches[0].credential;
  EXPECT_EQ(cred_a, controller_->credentials().For(executor_.launches[0].job_id));
  EXPECT_EQ(cred_a.size(), 64u);
  EXPECT_NE(controller_->credentials().For(a), controller_->credentials().For(b));

  CoordinatorService service(*controller_, controller_->credentials(), 1000);
  weft::v1::RegisterRequest req;
  weft::v1::RegisterResponse resp;
  req.mutable_learner()->set_job_id(executor_.launches[0].job_id);
  req.mutable_learner()->set_attempt(executor_.launches[0].attempt);
  req.mutable_learner()->set_credential("wrong");
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Another job's credential does not work either.
  const std::string other = executor_.launches[0].job_id == a ? b : a;
  req.mutable_learner()->set_credential(controller_->credentials().For(other));
  EXPECT_EQ(service.Register(nullptr, &req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  req.mutable_learner()->set_credential(cred_a);
  EXPECT_TRUE(service.Register(nullptr, &req, &resp).ok());
  EXPECT_TRUE(resp.accepted()) << resp.reason();
}

}  // namespace weft

namespace weft {
namespace {

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
  }
  JobRecord r = *store_->GetJob(id);
  ASSERT_EQ(r.learners.size(), 2u);
  EXPECT_EQ(r.learners[0].pid, 4242);
  EXPECT_EQ(r.learners[1].pid, 4243);
  EXPECT_THAT(store_->History(id)->at(1).reason, HasSubstr("placed 2 learners on node local"));

  EXPECT_TRUE(controller_->OnRegister(id, 0, 1, 4242, 0).accepted);
  EXPECT_EQ(State(id), JobState::kStarting) << "rank 1 has not registered yet";
  EXPECT_FALSE(controller_->OnRegister(id, 2, 1, 99, 0).accepted) << "no rank 2 in a gang of 2";
  RegisterDecision wrong_world = controller_->OnRegister(id, 1, 1, 4243, /*world_size=*/3);
  EXPECT_FALSE(wrong_world.accepted);
  EXPECT_THAT(wrong_world.reason, HasSubstr("started for a gang of 3; the job has 2"));
  EXPECT_TRUE(controller_->OnRegister(id, 1, 1, 4243, 0).accepted);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_THAT(Reason(id), HasSubstr("all 2 learners registered (pids 4242, 4243)"));

  // Only rank 0's progress is the job's.
  EXPECT_TRUE(controller_->OnHeartbeat(id, 1, 1, JobProgress{0, 2, 999, 1000, 1}));
  EXPECT_EQ(store_->GetJob(id)->progress.step, 0);
  EXPECT_TRUE(controller_->OnHeartbeat(id, 0, 1, JobProgress{0, 2, 10, 1000, 1}));
  EXPECT_EQ(store_->GetJob(id)->progress.step, 10);

  // Rank 1 finishing first changes nothing; rank 0's success completes the job.
  controller_->OnFinished(id, 1, 1, true, "rank 1 of 2 done");
  executor_.Exit(id, 1, 0, 0, /*rank=*/1);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kRunning);
  ASSERT_TRUE(controller_->OnCommitArtifact(id, 1, Model(id, "final", 0.85)).ok());
  controller_->OnFinished(id, 0, 1, true, "budget exhausted: 2 epochs, test_accuracy 0.8500");
  executor_.Exit(id, 1, 0, 0, /*rank=*/0);
  controller_->Tick();
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(Reason(id), "budget exhausted: 2 epochs, test_accuracy 0.8500");
  EXPECT_TRUE(store_->GetJob(id)->learners.empty());
}

TEST_F(ControllerTest, OneDeadLearnerStopsTheGangAndRestartsTheJob) {
  std::string id = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0);
  controller_->OnRegister(id, 1, 1, 4243, 0);
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
  EXPECT_TRUE(controller_->OnCommitCheckpoint(id, 1, {77, 0, CheckpointPath(dir, 77), 10, 0}).ok());
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

TEST_F(ControllerTest, ASilentRankRestartsTheGang) {
  std::string id = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(id, 0, 1, 4242, 0);
  controller_->OnRegister(id, 1, 1, 4243, 0);
  // Rank 0 keeps heartbeating, rank 1 falls silent (hung or stopped).
  for (int i = 0; i < 61; ++i) {
    clock_.Advance(1000);
    controller_->OnHeartbeat(id, 0, 1, {});
    controller_->Tick();
  }
  EXPECT_EQ(State(id), JobState::kQueued);
  EXPECT_THAT(Reason(id), HasSubstr("learner rank 1 stopped heartbeating"));
}

TEST_F(ControllerTest, RecoverAdoptsAWholeGangOrRequeuesIt) {
  std::string whole = Submit(kGang);
  controller_->Tick();
  controller_->OnRegister(whole, 0, 1, 4242, 0);
  controller_->OnRegister(whole, 1, 1, 4243, 0);
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
