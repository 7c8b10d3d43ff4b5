// The scale-out parameter server end to end at the process level (issue 15): two real weft-ps
// processes on two logical nodes (127.0.0.1 and 127.0.0.2), reached over gRPC by learners on
// threads; acknowledgements dropped on the way back make learners push again, and every push is
// applied once. With a TLS identity, a shard answers only learners that pin its certificate.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/tls_identity.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/remote_client.h"

namespace weft::ps {
namespace {

constexpr char kJob[] = "job-remote-ps-test";
constexpr char kCredential[] = "s3cret-credential-0123456789abcdef";

// One weft-ps process on `host`, port chosen by the server and read from its log; over TLS with
// `tls` when it holds a certificate.
class PsProcess {
 public:
  explicit PsProcess(const std::string& host, const TlsIdentity& tls = {},
                     const std::string& credential = kCredential) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      setenv("WEFT_JOB_ID", kJob, 1);
      setenv("WEFT_PS_CREDENTIAL", credential.c_str(), 1);
      if (!tls.cert_pem.empty()) {
        setenv("WEFT_PS_TLS_CERT", tls.cert_pem.c_str(), 1);
        setenv("WEFT_PS_TLS_KEY", tls.key_pem.c_str(), 1);
      }
      const std::string bin = std::string(WEFT_BIN_DIR) + "/weft-ps";
      const std::string listen = host + ":0";
      execl(bin.c_str(), bin.c_str(), "--listen", listen.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
    char line[512];
    const std::regex port_re("listening on port ([0-9]+)");
    while (fgets(line, sizeof line, out_) != nullptr) {
      std::cmatch m;
      if (std::regex_search(line, m, port_re)) {
        address_ = host + ":" + m[1].str();
        listening_ = line;
        break;
      }
    }
    EXPECT_FALSE(address_.empty()) << "weft-ps did not say where it listens";
  }
  ~PsProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) fclose(out_);
  }
  const std::string& address() const { return address_; }
  const std::string& listening() const { return listening_; }  // the line that says where
  // The exit status after `timeout_s` seconds at most; -1 if it still runs.
  int WaitExit(int timeout_s) {
    for (int i = 0; i < timeout_s * 20; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  FILE* out_ = nullptr;
  std::string address_, listening_;
};

ServerConfig Config(int learners, int64_t params, Consistency consistency) {
  ServerConfig config;
  config.num_slots = learners;
  config.num_params = params;
  config.consistency = consistency;
  config.staleness = 2;
  config.optimizer.learning_rate = 0.01;
  return config;
}

std::unique_ptr<RemotePsClient> Client(const std::vector<std::string>& addresses, int learner,
                                       int64_t params, const std::string& credential = kCredential,
                                       const std::string& pinned_cert = "", int64_t attempt = 1) {
  auto client =
      RemotePsClient::Connect(addresses, {kJob, attempt, credential, learner}, params, pinned_cert);
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(*client);
}

class RemotePsTest : public ::testing::TestWithParam<Consistency> {};

// Two learners push kPushes gradients of ones each; every third acknowledgement of shard 1 is
// dropped, so those pushes go out again. Every gradient is applied once on every shard: the
// parameters moved by exactly lr × (gradients applied), on both shards, and the servers
// acknowledged exactly the resent pushes as duplicates.
TEST_P(RemotePsTest, TwoLearnersTwoServersEveryPushAppliedOnceDespiteDroppedAcks) {
  constexpr int64_t kParams = 1001;
  constexpr int kPushes = 60;
  const Consistency consistency = GetParam();
  PsProcess a("127.0.0.1"), b("127.0.0.2");
  ASSERT_FALSE(a.address().empty());
  ASSERT_FALSE(b.address().empty());
  const std::vector<std::string> servers = {a.address(), b.address()};
  std::vector<float> fresh(kParams, 1.0f);
  ASSERT_TRUE(Client(servers, 0, kParams)
                  ->Init(Config(2, kParams, consistency), ShardedState{}, fresh, 10'000)
                  .ok());
  std::vector<uint64_t> resent(2);
  std::vector<std::thread> learners;
  for (int l = 0; l < 2; ++l) {
    learners.emplace_back([&, l] {
      auto client = Client(servers, l, kParams);
      // The first acknowledgement of every third push to shard 1 is lost (called on shard 1's
      // thread only for shard 1).
      auto last_dropped = std::make_shared<int64_t>(0);
      client->set_drop_ack([last_dropped](int shard, int64_t seq) {
        if (shard != 1 || seq % 3 != 0 || *last_dropped == seq) return false;
        *last_dropped = seq;
        return true;
      });
      std::vector<float> params(kParams), grad(kParams, 1.0f);
      for (int seq = 1; seq <= kPushes; ++seq) {
        ASSERT_TRUE(client->Pull(params.data(), 10'000).ok());
        absl::Status s = client->Push(seq, grad.data(), false, 30'000);
        ASSERT_TRUE(s.ok()) << s;
      }
      ASSERT_TRUE(client->Done().ok());
      resent[l] = client->resent();
    });
  }
  for (std::thread& t : learners) t.join();
  auto leader = Client(servers, 0, kParams);
  ApplierStats stats;
  uint64_t duplicates = 0;
  absl::StatusOr<ShardedState> state = leader->Snapshot(&stats, &duplicates);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(resent[0], uint64_t{kPushes / 3});
  EXPECT_EQ(resent[1], uint64_t{kPushes / 3});
  EXPECT_EQ(duplicates, resent[0] + resent[1]);
  EXPECT_EQ(stats.gradients_applied, uint64_t{2 * kPushes});
  // bsp: one version per round of two; asp and ssp: one per gradient.
  const uint64_t versions = consistency == Consistency::kBsp ? kPushes : 2 * kPushes;
  EXPECT_EQ(stats.version, versions);
  const float expected =
      1.0f - 0.01f * static_cast<float>(consistency == Consistency::kBsp ? kPushes : 2 * kPushes);
  ASSERT_EQ(state->shards.size(), 2u);
  for (const ServerState& shard : state->shards) {
    EXPECT_EQ(shard.version, versions);
    EXPECT_EQ(shard.positions, (std::vector<int64_t>{kPushes, kPushes}));
    for (float p : shard.params) ASSERT_NEAR(p, expected, 1e-4);
  }
  EXPECT_EQ(state->shards[0].params.size() + state->shards[1].params.size(), size_t{kParams});
  // Progress: the same positions and counters without the floats.
  ApplierStats progress_stats;
  auto positions = leader->Progress(&progress_stats);
  ASSERT_TRUE(positions.ok()) << positions.status();
  EXPECT_EQ(*positions, (std::vector<int64_t>{kPushes, kPushes}));
  EXPECT_EQ(progress_stats.gradients_applied, stats.gradients_applied);
  ASSERT_TRUE(leader->Shutdown().ok());
  EXPECT_EQ(a.WaitExit(10), 0);
  EXPECT_EQ(b.WaitExit(10), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, RemotePsTest,
                         ::testing::Values(Consistency::kBsp, Consistency::kAsp,
                                           Consistency::kSsp));

// A checkpoint taken while a push had reached shard 0 but not shard 1: resumed, the learner
// replays from the smaller position; shard 0 acknowledges the replay as a duplicate and shard 1
// applies it, so each shard has applied that gradient once.
TEST(RemotePsResumeTest, AReplayAfterACheckpointBetweenShardsIsAppliedOncePerShard) {
  PsProcess a("127.0.0.1"), b("127.0.0.2");
  const std::vector<std::string> servers = {a.address(), b.address()};
  ShardedState checkpoint;
  checkpoint.shards.resize(2);
  checkpoint.shards[0] = {4, {1.0f, 1.0f}, {}, {4}};
  checkpoint.shards[1] = {3, {1.0f, 1.0f}, {}, {3}};
  ASSERT_EQ(checkpoint.ResumePositions(), (std::vector<int64_t>{3}));
  auto client = Client(servers, 0, 4);
  ASSERT_TRUE(client->Init(Config(1, 4, Consistency::kAsp), checkpoint, {}, 10'000).ok());
  std::vector<float> params(4), grad(4, 1.0f);
  ASSERT_TRUE(client->Pull(params.data(), 10'000).ok());
  EXPECT_EQ(client->applied(), 3);
  ASSERT_TRUE(client->Push(4, grad.data(), false, 10'000).ok());
  ApplierStats stats;
  uint64_t duplicates = 0;
  absl::StatusOr<ShardedState> state = client->Snapshot(&stats, &duplicates);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(duplicates, 1u);
  EXPECT_EQ(state->shards[0].params, (std::vector<float>{1.0f, 1.0f}));  // not applied again
  EXPECT_EQ(state->shards[1].params, (std::vector<float>{0.99f, 0.99f}));
  EXPECT_EQ(state->shards[0].positions, (std::vector<int64_t>{4}));
  EXPECT_EQ(state->shards[1].positions, (std::vector<int64_t>{4}));
  ASSERT_TRUE(client->Shutdown().ok());
}

TEST(RemotePsAuthTest, AWrongCredentialIsRefusedAndOnlyRankZeroShutsTheServerDown) {
  PsProcess a("127.0.0.1");
  const std::vector<std::string> servers = {a.address()};
  std::vector<float> fresh(2, 0.0f), out(2);
  auto stranger = Client(servers, 0, 2, "not-the-credential-of-this-job-xx");
  EXPECT_EQ(stranger->Init(Config(2, 2, Consistency::kAsp), {}, fresh, 1000).code(),
            absl::StatusCode::kUnauthenticated);
  ASSERT_TRUE(Client(servers, 0, 2)->Init(Config(2, 2, Consistency::kAsp), {}, fresh, 10'000).ok());
  EXPECT_EQ(stranger->Pull(out.data(), 1000).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Client(servers, 1, 2)->Shutdown().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(Client(servers, 1, 2)->Pull(out.data(), 1000).ok());
  ASSERT_TRUE(Client(servers, 0, 2)->Shutdown().ok());
  EXPECT_EQ(a.WaitExit(10), 0);
}

// A shard of attempt 2 holds attempt 2's credential only (weftd derives one per attempt and
// role, LearnerCredentialsTest): a learner of attempt 1 that lives on, or tenant code that kept
// its credential, is refused, whichever attempt it says it is from.
TEST(RemotePsAuthTest, APushWithAnEarlierAttemptsCredentialIsRefused) {
  const std::string attempt1 = "attempt-1-credential-0123456789ab";
  const std::string attempt2 = "attempt-2-credential-0123456789ab";
  PsProcess a("127.0.0.1", {}, attempt2);
  const std::vector<std::string> servers = {a.address()};
  std::vector<float> fresh(2, 1.0f), out(2), grad(2, 1.0f);
  auto rank0 = Client(servers, 0, 2, attempt2, "", 2);
  ASSERT_TRUE(rank0->Init(Config(2, 2, Consistency::kAsp), {}, fresh, 10'000).ok());
  for (int64_t claimed : {1, 2}) {
    auto old = Client(servers, 1, 2, attempt1, "", claimed);
    EXPECT_EQ(old->Pull(out.data(), 1000).status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(old->Push(1, grad.data(), false, 1000).code(), absl::StatusCode::kUnauthenticated);
  }
  // Attempt 2's credential with attempt 1's number is refused too: the shard is attempt 2's.
  auto mislabelled = Client(servers, 1, 2, attempt2, "", 1);
  EXPECT_EQ(mislabelled->Push(1, grad.data(), false, 1000).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(rank0->Pull(out.data(), 10'000).ok());
  EXPECT_EQ(out, fresh) << "nothing of theirs was applied";
  ASSERT_TRUE(rank0->Shutdown().ok());
  EXPECT_EQ(a.WaitExit(10), 0);
}

// weftd with TLS gives each attempt's shards one identity (a seed of its own) and its learners
// that certificate to pin. A learner pinning it trains through the shard; a plain-text client,
// and one pinning another attempt's certificate, get no answer at all, not even a refusal.
TEST(RemotePsTlsTest, AShardOverTlsAnswersOnlyLearnersPinningItsCertificate) {
  auto mine = DeterministicTlsIdentity(std::string(32, '1'), kPsTlsName);
  auto other_attempt = DeterministicTlsIdentity(std::string(32, '2'), kPsTlsName);
  ASSERT_TRUE(mine.ok() && other_attempt.ok());
  PsProcess a("127.0.0.1", *mine);
  ASSERT_FALSE(a.address().empty());
  EXPECT_THAT(a.listening(), ::testing::HasSubstr("over TLS"));
  const std::vector<std::string> servers = {a.address()};
  std::vector<float> fresh(2, 1.0f), out(2), grad(2, 1.0f);
  const ServerConfig config = Config(1, 2, Consistency::kAsp);
  absl::Status plain = Client(servers, 0, 2)->Init(config, {}, fresh, 1500);
  EXPECT_FALSE(plain.ok());
  EXPECT_NE(plain.code(), absl::StatusCode::kUnauthenticated) << "it reached the service";
  absl::Status stranger =
      Client(servers, 0, 2, kCredential, other_attempt->cert_pem)->Init(config, {}, fresh, 1500);
  EXPECT_FALSE(stranger.ok());
  EXPECT_NE(stranger.code(), absl::StatusCode::kUnauthenticated) << "it reached the service";

  auto learner = Client(servers, 0, 2, kCredential, mine->cert_pem);
  ASSERT_TRUE(learner->Init(config, {}, fresh, 10'000).ok());
  ASSERT_TRUE(learner->Pull(out.data(), 10'000).ok());
  ASSERT_TRUE(learner->Push(1, grad.data(), false, 10'000).ok());
  ASSERT_TRUE(learner->Pull(out.data(), 10'000).ok());
  EXPECT_NEAR(out[0], 0.99f, 1e-6);
  ASSERT_TRUE(learner->Shutdown().ok());
  EXPECT_EQ(a.WaitExit(10), 0);
}

}  // namespace
}  // namespace weft::ps
