// The controller's test harness: a real SQLite store, the real FIFO policy, a fake executor (no
// processes) and a manual clock, so every lifecycle path is driven step by step.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/fake_executor.h"
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
    // Manifests name fashion-mnist by default; the executor is a fake, so nothing reads it.
    ASSERT_TRUE(
        store_->PutDataset({"fashion-mnist", dir_ + "/fashion-mnist", "idx", true, {}, 0}).ok());
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
    o.nodes = {scheduler::Node{"local", {2, 4096, 0}, {}, {}, {}}};
    o.coordinator_address = "127.0.0.1:9";
    o.disk_quota = disk_quota_;
    if (adjust_options_) adjust_options_(o);
    controller_ = std::make_unique<Controller>(*store_, executor_, policy ? *policy : policy_,
                                               clock_, o, env_);
  }
  // A controller that issues learner credentials (under "a-secret-key"), on one node of `cpus`.
  void MakeKeyedController(int cpus = 2, int64_t memory_mb = 4096, bool ps_tls = false) {
    ControllerOptions o;
    o.ps_tls = ps_tls;
    o.data_dir = dir_;
    o.nodes = {scheduler::Node{"local", {static_cast<double>(cpus), memory_mb, 0}, {}, {}, {}}};
    o.coordinator_address = "127.0.0.1:9";
    o.learner_key = "a-secret-key";
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
  // Up to `seconds` control rounds a second apart in which, of job `id`'s learners, only
  // `learner` heartbeats; stops early once `until` (if given) holds.
  void HeartbeatOnly(const std::string& id, int learner, int seconds,
                     const std::function<bool()>& until = nullptr) {
    for (int i = 0; i < seconds && !(until && until()); ++i) {
      clock_.Advance(1000);
      controller_->OnHeartbeat(id, learner, 1, {});
      controller_->Tick();
    }
  }
  // Writes a model file of the job and returns its model record.
  ModelRecord Model(const std::string& id, const std::string& kind, double acc) {
    std::string path = controller_->layout().JobDir(id) + "/results/" + kind + "/model.pt";
    EXPECT_TRUE(MakeDirs(controller_->layout().JobDir(id) + "/results/" + kind).ok());
    EXPECT_TRUE(WriteFileAtomic(path, "model-bytes").ok());
    return ModelRecord{
        kind, path, ModelCardPath(controller_->layout().ResultDir(id), kind), acc, 1, 10, 11, 0};
  }

  std::string dir_;
  ManualClock clock_;
  testing::FaultInjectionEnv env_;  // the real filesystem unless a test injects a fault
  FakeExecutor executor_;
  scheduler::FifoPolicy policy_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Controller> controller_;
  DiskQuota* disk_quota_ = nullptr;  // what MakeController gives the controller
  std::function<void(ControllerOptions&)> adjust_options_;  // applied by MakeController last
};

}  // namespace weft
