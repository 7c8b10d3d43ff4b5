// A scheduling round's policy runs without the controller's job lock: learners' reports are
// answered while it decides, and a round decided over a job that changed meanwhile is dropped.
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "common/ids.h"
#include "control/controller_fixture.h"

namespace weft {
namespace {

// The FIFO policy, held inside Schedule until the test lets it go: a round as long as the test
// wants, with no timing in the test.
class HeldPolicy : public scheduler::Policy {
 public:
  std::string Name() const override { return "held-fifo"; }
  scheduler::Decisions Schedule(const scheduler::ClusterSnapshot& snapshot) override {
    std::unique_lock<std::mutex> lock(mu_);
    deciding_ = true;
    jobs_seen_ = snapshot.jobs.size();
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    released_ = false;
    deciding_ = false;
    return fifo_.Schedule(snapshot);
  }
  // Waits (at most 60 s) until a round is inside Schedule; false if none came.
  bool WaitUntilDeciding() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(60), [&] { return deciding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  size_t jobs_seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_seen_;
  }

 private:
  scheduler::FifoPolicy fifo_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool deciding_ = false;
  bool released_ = false;
  size_t jobs_seen_ = 0;
};

constexpr char kOneCpu[] = R"(
name: small
model: {architecture: mlp}
training: {epochs: 2}
resources: {cpus: 1, memory_mb: 512}
)";

class ControllerRoundTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    adjust_options_ = [](ControllerOptions& o) { o.tenant_max_active_jobs = 10000; };
    MakeController(&held_);
  }
  // Runs one Tick on a thread of its own, which the test joins.
  void TickInBackground() {
    round_ = std::thread([this] { controller_->Tick(); });
  }
  void TearDown() override {
    held_.Release();
    if (round_.joinable()) round_.join();
    ControllerTest::TearDown();
  }

  HeldPolicy held_;
  std::thread round_;
};

TEST_F(ControllerRoundTest, AHeartbeatIsAnsweredWhileARoundOverFiveThousandQueuedJobsDecides) {
  const std::string running = Submit(kOneCpu);
  TickInBackground();
  ASSERT_TRUE(held_.WaitUntilDeciding());
  held_.Release();
  round_.join();
  ASSERT_EQ(State(running), JobState::kStarting);
  controller_->OnRegister(running, 0, 1, 100, 1, {});
  ASSERT_EQ(State(running), JobState::kRunning);

  // 5,000 jobs that cannot start while `running` holds one of the node's two cpus: one
  // submitted, the others stored as its copies (submitting each would take half a minute).
  const std::string first_queued = Submit(kManifest);
  JobRecord copy = *store_->GetJob(first_queued);
  for (int i = 1; i < 5000; ++i) {
    copy.id = NewJobId(clock_.NowMs() + i);
    copy.created_ms = copy.updated_ms = clock_.NowMs() + i;
    ASSERT_TRUE(store_->CreateJob(copy, "submitted").ok()) << i;
  }
  TickInBackground();
  ASSERT_TRUE(held_.WaitUntilDeciding());
  EXPECT_EQ(held_.jobs_seen(), 5001u);
  // The round is inside the policy: the learner's heartbeat and metrics are answered all the
  // same, and a person can read the job.
  auto heartbeat = std::async(std::launch::async, [&] {
    return controller_->OnHeartbeat(running, 0, 1, JobProgress{0, 2, 5, 100, 320});
  });
  const bool answered = heartbeat.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  if (!answered) held_.Release();  // else the heartbeat never returns, nor the test
  ASSERT_TRUE(answered) << "the heartbeat waited behind the scheduling round";
  EXPECT_EQ(heartbeat.get(), ReportAnswer::kKeepRunning);
  auto metrics = std::async(std::launch::async, [&] {
    return controller_->OnMetrics(
        running, 0, 1, {MetricRecord{5, 0, clock_.NowMs(), 0.5, 10, std::nullopt, std::nullopt}},
        JobProgress{0, 2, 5, 100, 320});
  });
  ASSERT_EQ(metrics.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(metrics.get(), ReportAnswer::kKeepRunning);
  EXPECT_EQ(store_->GetJob(running)->progress.step, 5);
  held_.Release();
  round_.join();
  EXPECT_EQ(State(running), JobState::kRunning);
  // The round's outcome was applied: why the queued jobs wait is published.
  EXPECT_THAT(WaitingReason(first_queued), ::testing::HasSubstr("waiting"));
}

TEST_F(ControllerRoundTest, ARoundDecidedOverAJobThatChangedMeanwhileIsDroppedAndDecidedAgain) {
  const std::string first = Submit(kManifest);
  clock_.Advance(1);  // first in the queue's order
  const std::string second = Submit(kManifest);
  TickInBackground();
  ASSERT_TRUE(held_.WaitUntilDeciding());
  // While the policy decides to place `first`, a person halts it.
  auto halted = std::async(std::launch::async, [&] { return controller_->Halt(first); });
  const bool done = halted.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  if (!done) held_.Release();
  ASSERT_TRUE(done) << "the halt waited behind the scheduling round";
  ASSERT_TRUE(halted.get().ok());
  held_.Release();
  round_.join();
  EXPECT_EQ(State(first), JobState::kHalted);
  EXPECT_EQ(State(second), JobState::kQueued);
  EXPECT_TRUE(executor_.launches.empty());
  // The next round decides over what is there now.
  TickInBackground();
  ASSERT_TRUE(held_.WaitUntilDeciding());
  held_.Release();
  round_.join();
  EXPECT_EQ(State(second), JobState::kStarting);
  EXPECT_EQ(State(first), JobState::kHalted);
}

}  // namespace
}  // namespace weft
