// The scale-up parameter server under load and under kills: learner threads hammer their slots
// while the applier runs (CI runs this file under ThreadSanitizer too, scripts/unit-tsan.sh), a
// fault hook kills learners between any two protocol steps 10,000 times per consistency mode, and
// real learner processes are SIGKILLed mid-publish. Each gradient is a one-hot at an index of its
// own (slot, sequence number), so the final parameters show which gradients were applied and how
// often.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "ps/ps_test_util.h"
#include "ps/shared_client.h"
#include "ps/shared_server.h"

namespace weft::ps {
namespace {

constexpr int kSlots = 3;
constexpr int64_t kMaxSeq = 8192;    // per slot: index slot * kMaxSeq + seq
constexpr int64_t kWaitMs = 20'000;  // a wait this long is a deadlock

ServerConfig StressConfig(Consistency consistency) {
  ServerConfig config;
  config.num_slots = kSlots;
  config.num_params = kSlots * kMaxSeq;
  config.consistency = consistency;
  config.staleness = 2;
  config.optimizer.learning_rate = 1;
  config.lease_ms = 200;
  return config;
}

struct LearnerResult {
  int64_t acknowledged = 0;  // Publish + WaitApplied returned OK
  int64_t kills = 0;
  absl::Status error;
};

// One learner slot's life: attach, then pull / publish a one-hot / wait, until `gradients` are
// acknowledged or `kills` kills have happened; a kill (the hook fires with probability
// kill_odds at each protocol step) ends the client, and a replacement attaches at once.
LearnerResult RunLearner(const std::string& name, int slot, int64_t gradients, int64_t kills,
                         double kill_odds, uint32_t seed) {
  LearnerResult result;
  std::mt19937 rng(seed);
  std::bernoulli_distribution kill(kill_odds);
  std::vector<float> params(kSlots * kMaxSeq), grad(kSlots * kMaxSeq, 0.0f);
  while (result.acknowledged < gradients && (kills == 0 || result.kills < kills)) {
    auto client = SharedPsClient::Attach(name, slot);
    if (!client.ok()) return {result.acknowledged, result.kills, client.status()};
    if (kill_odds > 0) (*client)->set_kill_hook([&](KillPoint) { return kill(rng); });
    for (;;) {
      absl::StatusOr<uint64_t> version = (*client)->Pull(params.data(), kWaitMs);
      uint64_t seq = (*client)->published() + 1;
      if (seq >= kMaxSeq) return result;
      int64_t index = slot * kMaxSeq + static_cast<int64_t>(seq);
      absl::StatusOr<uint64_t> published = absl::AbortedError("not reached");
      absl::Status applied = absl::AbortedError("not reached");
      if (version.ok()) {
        grad[index] = 1;
        published = (*client)->Publish(grad.data(), *version, kWaitMs);
        grad[index] = 0;
      }
      if (published.ok()) {
        EXPECT_EQ(*published, seq);
        applied = (*client)->WaitApplied(*published, kWaitMs);
      }
      if (applied.ok()) {
        ++result.acknowledged;
        if (result.acknowledged >= gradients) break;
        continue;
      }
      absl::Status failure = !version.ok()     ? version.status()
                             : !published.ok() ? published.status()
                                               : applied;
      if (failure.code() != absl::StatusCode::kAborted) {
        result.error = failure;  // a deadline: the protocol deadlocked
        return result;
      }
      ++result.kills;
      break;
    }
  }
  return result;
}

// Waits until the applier has taken every published gradient, then stops it.
void DrainAndStop(const std::string& name, std::atomic<bool>& stop, std::thread& applier) {
  SharedSegment raw = SharedSegment::Open(name).value();
  SegmentView view = SegmentView::Of(raw).value();
  for (int slot = 0; slot < kSlots; ++slot) {
    SlotHeader& header = view.slot(slot);
    int64_t deadline = MonotonicMs() + kWaitMs;
    while (header.applied.load() != header.published.load() && MonotonicMs() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(header.applied.load(), header.published.load()) << "slot " << slot;
  }
  stop = true;
  applier.join();
}

// Checks each slot's one-hot indices: every gradient published was applied exactly once, and
// nothing else was.
void ExpectEveryPublishedGradientAppliedOnce(SharedParameterServer& server, const std::string& name,
                                             Consistency consistency) {
  SharedSegment raw = SharedSegment::Open(name).value();
  SegmentView view = SegmentView::Of(raw).value();
  std::vector<float> params(kSlots * kMaxSeq);
  server.CopyParams(params.data());  // the applier has stopped
  uint64_t published_total = 0;
  for (int slot = 0; slot < kSlots; ++slot) {
    const uint64_t published = view.slot(slot).published.load();
    ASSERT_EQ(view.slot(slot).applied.load(), published) << "slot " << slot;
    published_total += published;
    for (int64_t seq = 1; seq < kMaxSeq; ++seq) {
      float value = params[slot * kMaxSeq + seq];
      if (static_cast<uint64_t>(seq) > published) {
        ASSERT_EQ(value, 0.0f) << "slot " << slot << " gradient " << seq << " never published";
      } else if (consistency == Consistency::kBsp) {
        // Averaged with the round's other gradients: -1/k for a round of k, once.
        ASSERT_TRUE(value == -1.0f || value == -0.5f || value == -1.0f / 3)
            << "slot " << slot << " gradient " << seq << ": " << value;
      } else {
        ASSERT_EQ(value, -1.0f) << "slot " << slot << " gradient " << seq;
      }
    }
  }
  EXPECT_EQ(server.Stats().gradients_applied, published_total);
  EXPECT_EQ(server.Stats().discarded_non_finite, 0u);
}

class SharedPsStressTest : public ::testing::TestWithParam<Consistency> {};

TEST_P(SharedPsStressTest, HammeredSlotsApplyEveryPublishedGradientExactlyOnce) {
  const std::string name = FreshSegmentName();
  std::vector<float> init(kSlots * kMaxSeq, 0.0f);
  auto server = SharedParameterServer::Create(name, StressConfig(GetParam()), init.data()).value();
  std::atomic<bool> stop{false};
  std::thread applier([&] { server->Run(stop); });
  std::vector<LearnerResult> results(kSlots);
  std::vector<std::thread> learners;
  for (int slot = 0; slot < kSlots; ++slot) {
    learners.emplace_back([&, slot] { results[slot] = RunLearner(name, slot, 2000, 0, 0, slot); });
  }
  for (auto& t : learners) t.join();
  for (int slot = 0; slot < kSlots; ++slot) {
    EXPECT_TRUE(results[slot].error.ok()) << results[slot].error;
    EXPECT_EQ(results[slot].acknowledged, 2000);
  }
  DrainAndStop(name, stop, applier);
  ExpectEveryPublishedGradientAppliedOnce(*server, name, GetParam());
  if (GetParam() == Consistency::kAsp) {
    EXPECT_EQ(server->Stats().version, 3u * 2000);
  }
}

TEST_P(SharedPsStressTest, KillsBetweenAnyTwoProtocolStepsNeitherLoseNorDoubleAGradient) {
  const std::string name = FreshSegmentName();
  std::vector<float> init(kSlots * kMaxSeq, 0.0f);
  auto server = SharedParameterServer::Create(name, StressConfig(GetParam()), init.data()).value();
  std::atomic<bool> stop{false};
  std::thread applier([&] { server->Run(stop); });
  constexpr int64_t kKillsPerSlot = 3334;  // 10,002 per mode
  const uint32_t seed = static_cast<uint32_t>(MonotonicMs());
  std::vector<LearnerResult> results(kSlots);
  std::vector<std::thread> learners;
  for (int slot = 0; slot < kSlots; ++slot) {
    learners.emplace_back([&, slot] {
      results[slot] = RunLearner(name, slot, kMaxSeq, kKillsPerSlot, 0.25, seed + slot);
    });
  }
  for (auto& t : learners) t.join();
  int64_t kills = 0;
  for (int slot = 0; slot < kSlots; ++slot) {
    EXPECT_TRUE(results[slot].error.ok()) << "seed " << seed << ": " << results[slot].error;
    kills += results[slot].kills;
  }
  EXPECT_EQ(kills, kSlots * kKillsPerSlot) << "seed " << seed;
  DrainAndStop(name, stop, applier);
  ExpectEveryPublishedGradientAppliedOnce(*server, name, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modes, SharedPsStressTest,
                         ::testing::Values(Consistency::kBsp, Consistency::kAsp, Consistency::kSsp),
                         [](const auto& info) {
                           switch (info.param) {
                             case Consistency::kBsp:
                               return std::string("Bsp");
                             case Consistency::kAsp:
                               return std::string("Asp");
                             default:
                               return std::string("Ssp");
                           }
                         });

// A learner process publishing 1 MiB gradients of all ones is SIGKILLed at random instants 30
// times; a half-written gradient must never be applied, so the parameters stay uniform, at
// exactly minus the number of gradients published.
TEST(SharedPsProcessTest, ASigkilledLearnerProcessLeavesNoHalfWrittenGradient) {
  constexpr int64_t kParams = 1 << 18;
  const std::string name = FreshSegmentName();
  ServerConfig config;
  config.num_params = kParams;
  config.consistency = Consistency::kAsp;
  config.optimizer.learning_rate = 1;
  std::vector<float> init(kParams, 0.0f);
  auto server = SharedParameterServer::Create(name, config, init.data()).value();
  SharedSegment raw = SharedSegment::Open(name).value();
  SlotHeader& slot = SegmentView::Of(raw).value().slot(0);
  std::mt19937 rng(static_cast<uint32_t>(MonotonicMs()));
  for (int round = 0; round < 30; ++round) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(ready[0]);
      auto client = SharedPsClient::Attach(name, 0);
      if (!client.ok()) _exit(2);
      std::vector<float> params(kParams), ones(kParams, 1.0f);
      const char byte = 1;
      if (write(ready[1], &byte, 1) != 1) _exit(5);
      for (;;) {
        auto version = (*client)->Pull(params.data(), kWaitMs);
        if (!version.ok()) _exit(3);
        auto seq = (*client)->Publish(ones.data(), *version, kWaitMs);
        if (!seq.ok() || !(*client)->WaitApplied(*seq, kWaitMs).ok()) _exit(4);
      }
    }
    // The random instant counts from the learner's attach, not from its fork (a loaded
    // machine may take longer than the window to start it).
    close(ready[1]);
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the learner could not attach";
    close(ready[0]);
    // The first learner is killed only after its first gradient is published, so that the
    // kills are known to land amid publishing however slow the machine (or TSan) makes the
    // learner; later rounds kill at any instant.
    const int64_t first_deadline = MonotonicMs() + 60'000;
    while (round == 0 && slot.published.load() == 0 && MonotonicMs() < first_deadline) {
      server->ApplyReady();
    }
    ASSERT_GT(slot.published.load(), 0u) << "the learner published nothing in 60 s";
    const int64_t until = MonotonicMs() + std::uniform_int_distribution<int>(1, 15)(rng);
    while (MonotonicMs() < until) server->ApplyReady();
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the learner exited by itself: " << status;
    server->ApplyReady();  // a gradient published just before the kill is still applied
  }
  EXPECT_EQ(slot.applied.load(), slot.published.load());
  std::vector<float> params(kParams);
  server->CopyParams(params.data());
  const float expected = -static_cast<float>(slot.published.load());
  for (int64_t i = 0; i < kParams; ++i) {
    ASSERT_EQ(params[i], expected) << "parameter " << i << ": a gradient applied in part";
  }
}

}  // namespace
}  // namespace weft::ps
