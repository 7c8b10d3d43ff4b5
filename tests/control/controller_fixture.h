// The controller's test harness: a real SQLite store, the real FIFO policy, a fake executor (no
// processes) and a manual clock, so every lifecycle path is driven step by step.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "common/fault_env.h"
#include "common/files.h"
#include "control/controller.h"
#include "job/layout.h"
#include "scheduler/policy.h"
#include "store/sqlite_store.h"

namespace weft {

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
  // A controller over the fixture's store, executor and clock, with `policy` (default: FIFO).
  void MakeController(scheduler::Policy* policy = nullptr) {
    ControllerOptions o;
    o.data_dir = dir_;
    o.nodes = {scheduler::Node{"local", {2, 4096, 0}, {}}};
    o.coordinator_address = "127.0.0.1:9";
    controller_ = std::make_unique<Controller>(*store_, executor_, policy ? *policy : policy_,
                                               clock_, o, env_);
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
    return ArtifactRecord{
        kind, path, ModelCardPath(controller_->layout().ResultDir(id), kind), acc, 1, 10, 11, 0};
  }

  std::string dir_;
  ManualClock clock_;
  testing::FaultInjectionEnv env_;  // the real filesystem unless a test injects a fault
  FakeExecutor executor_;
  scheduler::FifoPolicy policy_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Controller> controller_;
};

}  // namespace weft
