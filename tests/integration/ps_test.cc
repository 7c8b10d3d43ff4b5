// Parameter-server jobs (training.sync: ps) through a real weftd and real learners on one node of
// two cpus: in every consistency mode 2 learners reach the allreduce gang's accuracy on the same
// data budget; a learner killed with SIGKILL is replaced alone (the job completes in its first
// attempt, rank 0's process throughout) and every batch of every learner's share is applied
// exactly once; and a crash of rank 0 (the server) restarts the job from the server's checkpoint
// with nothing applied twice. Scale-out (servers: 2): learners and weft-ps servers on two
// logical nodes, with acknowledgements dropped, and a learner killed and replaced.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::HistoryText;

// MLP on 12,000 training images: the data budget of gang_test.
const std::string kModel =
    "model: {architecture: mlp, hidden_units: [128]}\n"
    "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n";

class ParameterServerTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("ps");
    o.fashion_mnist = true;
    o.nodes = Nodes();
    o.env = Environment();
    return o;
  }
  // One node of two cpus: a 2-learner ps job runs there, beside its server.
  virtual std::string Nodes() const {
    return "nodes:\n  - {name: node-a, cpus: 2, memory_mb: 8192}\n";
  }
  virtual std::vector<std::string> Environment() const { return {}; }

  // Every match of `pattern`'s groups in `text`, in order.
  static std::vector<std::vector<int64_t>> Numbers(const std::string& text,
                                                   const std::string& pattern) {
    std::vector<std::vector<int64_t>> out;
    std::regex re(pattern);
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
      std::vector<int64_t> groups;
      for (size_t g = 1; g < it->size(); ++g) groups.push_back(std::stoll((*it)[g].str()));
      out.push_back(groups);
    }
    return out;
  }
  // Once job `id` has taken `step` steps, SIGKILLs its learner 1 and waits until weftd has
  // replaced it while learner 0 trains on (its pid unchanged). Returns the killed pid.
  int64_t KillLearner1AtStep(const std::string& id, int64_t step) {
    json running = WaitUntil(
        id, [step](const json& j) { return j["progress"].value("step", 0) >= step; }, 300,
        "step " + std::to_string(step));
    EXPECT_EQ(running["learners"].size(), 2u) << running.dump(2);
    const int64_t pid0 = running["learners"][0].value("pid", int64_t{0});
    const int64_t pid1 = running["learners"][1].value("pid", int64_t{0});
    EXPECT_EQ(kill(static_cast<pid_t>(pid1), SIGKILL), 0) << running.dump(2) << Log(id, 1);
    json replaced = WaitUntil(
        id,
        [pid1](const json& j) {
          return j["learners"].size() == 2 && j["learners"][1]["pid"].is_number() &&
                 j["learners"][1]["pid"].get<int64_t>() != pid1;
        },
        60, "learner 1 replaced");
    EXPECT_EQ(replaced["learners"][0]["pid"].get<int64_t>(), pid0) << "learner 0 trains on";
    return pid1;
  }
  // Rank 0's account at the end: {version, applied, discarded, position 0, position 1, total 0,
  // total 1}.
  static std::vector<int64_t> ServerAccount(const std::string& log0) {
    auto found = Numbers(log0,
                         "parameter server: version (\\d+), (\\d+) gradients applied, (\\d+) "
                         "discarded as non-finite; slot positions \\[(\\d+), (\\d+)\\] of "
                         "\\[(\\d+), (\\d+)\\]");
    EXPECT_EQ(found.size(), 1u) << log0;
    return found.empty() ? std::vector<int64_t>(7, -1) : found.back();
  }
};

TEST_F(ParameterServerTest, TwoLearnersReachTheAllreduceAccuracyInEveryConsistencyMode) {
  // 10 epochs, evaluated on all 10,000 test images: an asynchronous job's accuracy moves by a
  // point or more from one epoch to the next, so the jobs are compared by the best accuracy each
  // reaches (here, 2026-11: allreduce 0.855; asp, ssp 0.854-0.859; bsp as allreduce).
  const std::string model =
      "model: {architecture: mlp, hidden_units: [128]}\n"
      "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 10000}\n";
  const std::string budget = "training: {epochs: 10, batch_size: 64, threads: 1, seed: 3";
  const std::string resources = "resources: {learners: 2, cpus: 1}\n";
  const std::string allreduce = Submit("allreduce", model + budget + "}\n" + resources);
  std::map<std::string, std::string> ps;
  for (const char* mode : {"bsp", "asp", "ssp"}) {
    ps[mode] =
        Submit(std::string("ps-") + mode,
               model + budget + ", sync: ps, ps: {consistency: " + mode + "}}\n" + resources);
  }
  const double reference = WaitFor(allreduce, {"COMPLETED"}, 600).value("best_test_accuracy", 0.0);
  EXPECT_GT(reference, 0.83);
  for (const auto& [mode, id] : ps) {
    json done = WaitFor(id, {"COMPLETED"}, 600);
    const double accuracy = done.value("best_test_accuracy", 0.0);
    std::cout << "best test accuracy: allreduce " << reference << ", ps " << mode << " " << accuracy
              << " (final " << done["models"]["final"].value("test_accuracy", 0.0) << ")\n";
    EXPECT_NEAR(accuracy, reference, 0.01) << mode << ": within 1 point of allreduce";
    EXPECT_THAT(HistoryText(done), HasSubstr("placed 2 learners on node node-a"));
    // Every batch of both learners' shares of 10 epochs applied once: 6,000 samples each in
    // batches of 64 is 94 batches per epoch.
    const std::string log0 = Log(id, 0);
    std::vector<int64_t> account = ServerAccount(log0);
    EXPECT_EQ(account[3], 10 * 94) << log0;
    EXPECT_EQ(account[4], 10 * 94);
    EXPECT_EQ(account[1] + account[2], account[3] + account[4]) << "applied or discarded, once";
    EXPECT_EQ(account[2], 0);
    if (mode == "bsp") {
      EXPECT_EQ(account[0], 10 * 94) << "one version per round of two gradients";
    } else {
      EXPECT_EQ(account[0], account[1]) << "one version per gradient";
    }
    EXPECT_THAT(log0, HasSubstr("final model written"));
    EXPECT_THAT(Log(id, 1), ::testing::Not(HasSubstr("model written"))) << "only rank 0 exports";
    EXPECT_EQ(Numbers(log0, "evaluation: epoch (10) step").size(), 1u) << log0;
  }
}

TEST_F(ParameterServerTest, AKilledLearnerIsReplacedAloneAndEveryBatchIsAppliedOnce) {
  const std::string id =
      Submit("ps", kModel +
                       "training: {epochs: 300, batch_size: 64, threads: 1, seed: 3, sync: ps}\n"
                       "resources: {learners: 2, cpus: 1}\n");
  const int64_t pid1 = KillLearner1AtStep(id, 3000);
  // The server's counters are the job's gauges while it runs (rank 0 reports them).
  auto scraped = weftd_->ClientAs(weftd_->admin_token()).Get("/metrics");
  ASSERT_TRUE(scraped && scraped->status == 200);
  auto versions =
      Numbers(scraped->body, "weft_ps_versions\\{job=\"" + id + "\",tenant=\"[^\"]+\"\\} (\\d+)");
  ASSERT_EQ(versions.size(), 1u) << scraped->body;
  EXPECT_GT(versions[0][0], 0);
  EXPECT_THAT(scraped->body,
              HasSubstr("weft_ps_gradients_by_staleness{job=\"" + id + "\",staleness=\"0\","));
  EXPECT_THAT(scraped->body,
              HasSubstr("weft_ps_gradients_discarded{job=\"" + id + "\",reason=\"non_finite\","));
  json done = WaitFor(id, {"COMPLETED"}, 600);
  EXPECT_EQ(done["attempt"], 1) << HistoryText(done);
  EXPECT_THAT(HistoryText(done), HasSubstr("learner 1 replaced (pid " + std::to_string(pid1)));
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);

  // The server's count against the learners': rank 0 published its whole share; learner 1's
  // first process published up to where its replacement started (the slot's sequence), and the
  // replacement the rest. Applied (or discarded) equals published, batch for batch.
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  EXPECT_EQ(Numbers(log0, "attempt 1 pid (\\d+)").size(), 1u) << "one rank 0 process";
  std::vector<int64_t> account = ServerAccount(log0);
  const int64_t total = 300 * 94;
  EXPECT_EQ(account[3], total);
  EXPECT_EQ(account[4], total);
  auto published0 = Numbers(log0, "this learner published (\\d+) gradients");
  ASSERT_EQ(published0.size(), 1u);
  EXPECT_EQ(published0[0][0], total);
  auto starts = Numbers(log1, "training positions (\\d+) to (\\d+) of this learner's share");
  ASSERT_EQ(starts.size(), 2u) << log1;
  EXPECT_EQ(starts[0][0], 0);
  const int64_t killed_published = starts[1][0];  // the slot's sequence when it was taken over
  EXPECT_GT(killed_published, 0);
  auto published1 = Numbers(log1, "this process published (\\d+) gradients");
  ASSERT_EQ(published1.size(), 1u) << log1;  // the killed process never got to say
  EXPECT_EQ(killed_published + published1[0][0], total);
  EXPECT_EQ(account[1] + account[2], published0[0][0] + killed_published + published1[0][0]);
}

TEST_F(ParameterServerTest, ARank0CrashRestartsFromTheServersCheckpointWithNothingAppliedTwice) {
  const std::string id =
      Submit("ps", kModel +
                       "training: {epochs: 300, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: "
                       "{consistency: ssp, staleness: 2}}\n"
                       "resources: {learners: 2, cpus: 1}\n"
                       "checkpoint: {every_steps: 2000, every_seconds: 0}\n");
  // By steps only (2000, 4000, …): a checkpoint by time would move the later ones.
  json running = weftd_->WaitForJobWhere(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 5000; }, 300, "step 5000");
  ASSERT_EQ(kill(static_cast<pid_t>(running["learners"][0]["pid"].get<int64_t>()), SIGKILL), 0);
  json done = WaitFor(id, {"COMPLETED"}, 600);
  EXPECT_EQ(done["attempt"], 2) << HistoryText(done);
  const std::string log0 = Log(id, 0);
  auto resumed = Numbers(log0, "resumed from \\S+: version (\\d+), step (\\d+)");
  ASSERT_EQ(resumed.size(), 1u) << log0;
  EXPECT_GE(resumed[0][1], 4000) << log0;
  // The second server started at the checkpoint's positions and applied exactly the rest.
  std::vector<int64_t> account = ServerAccount(log0);
  EXPECT_EQ(account[3], 300 * 94);
  EXPECT_EQ(account[4], 300 * 94);
  EXPECT_EQ(account[1] + account[2] + resumed[0][1], account[3] + account[4]);
  // The killed rank 0's segment was removed when it was reaped, the second one by its rank 0.
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/weft-ps-" + id + "-1"));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/weft-ps-" + id + "-2"));
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
}

// Scale-out: the parameters sharded over 2 weft-ps servers, 2 learners and the servers spread over
// two logical nodes as one gang of 4. Every 7th push a server takes has its acknowledgement
// dropped (WEFT_LEARNER_PS_DROP_ACKS, passed on from weftd's environment): the learner sends it
// again, the server acknowledges the repeat as a duplicate, and each push is applied once.
class ScaleOutTest : public ParameterServerTest {
 protected:
  std::string Nodes() const override {
    return "nodes:\n  - {name: node-a, cpus: 2, memory_mb: 8192}\n"
           "  - {name: node-b, cpus: 2, memory_mb: 8192}\n";
  }
  std::vector<std::string> Environment() const override { return {"WEFT_LEARNER_PS_DROP_ACKS=7"}; }
  // weft-ps server `index`'s log, as `weft logs --server` prints it.
  std::string ServerLog(const std::string& id, int index) const {
    return weftd_->Cli({"logs", id, "--server", std::to_string(index)}).output;
  }
  // Each account line of a server's log: {applied, discarded, duplicates, position 0,
  // position 1}.
  static std::vector<std::vector<int64_t>> ShardAccounts(const std::string& log) {
    return Numbers(log,
                   "(\\d+) gradients applied, (\\d+) discarded as non-finite, (\\d+) duplicates "
                   "acknowledged; positions \\[(\\d+), (\\d+)\\]");
  }
  // A job restarted once (killed server, halt and resume) with `epochs` epochs of 94 batches per
  // share: rank 0 resumed at step >= `min_step` from each shard's checkpoint positions, and each
  // shard's last account (its second attempt's) shows both shares done and exactly the batches
  // its checkpoint did not hold applied. `accounts`: the account lines each log holds (0: any).
  void ExpectEachShardAppliedTheRest(const std::string& id, int64_t epochs, int64_t min_step,
                                     size_t accounts) {
    const std::string log0 = Log(id, 0);
    auto resumed = Numbers(log0,
                           "resumed from \\S+: version \\d+, step (\\d+) \\(shards: versions "
                           "\\[\\d+, \\d+\\], positions \\[(\\d+), (\\d+)\\] "
                           "\\[(\\d+), (\\d+)\\]\\)");
    ASSERT_EQ(resumed.size(), 1u) << log0;
    EXPECT_GE(resumed[0][0], min_step);
    for (int shard = 0; shard < 2; ++shard) {
      const std::string log = ServerLog(id, shard);
      auto found = ShardAccounts(log);
      ASSERT_FALSE(found.empty()) << log;
      if (accounts > 0) {
        EXPECT_EQ(found.size(), accounts) << "one account per attempt: " << log;
      }
      const std::vector<int64_t>& last = found.back();
      EXPECT_EQ(last[3], epochs * 94) << log;
      EXPECT_EQ(last[4], epochs * 94);
      const int64_t before = resumed[0][1 + 2 * shard] + resumed[0][2 + 2 * shard];
      EXPECT_EQ(last[0] + last[1] + before, 2 * epochs * 94) << log;
    }
  }
  static int64_t Sum(const std::vector<std::vector<int64_t>>& found) {
    int64_t sum = 0;
    for (const auto& f : found) sum += f[0];
    return sum;
  }
};

TEST_F(ScaleOutTest, TwoLearnersOnTwoNodesWithTwoServersApplyEveryPushOnceDespiteDroppedAcks) {
  const std::string id = Submit(
      "sharded", kModel +
                     "training: {epochs: 5, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: "
                     "{servers: 2}}\n"
                     "resources: {learners: 2, cpus: 1, placement: spread}\n");
  json done = WaitFor(id, {"COMPLETED"}, 600);
  const std::string history = HistoryText(done);
  EXPECT_EQ(done["attempt"], 1) << history;
  EXPECT_THAT(history, HasSubstr("placed 2 learners on nodes node-a, node-b; 2 parameter servers "
                                 "on nodes node-a, node-b"));
  EXPECT_THAT(history, HasSubstr("parameter servers at 127.0.0.1:"));
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
  // A job has the servers it asked for.
  auto no_such = weftd_->Cli({"logs", id, "--server", "2"});
  EXPECT_NE(no_such.exit_code, 0);
  EXPECT_THAT(no_such.output, HasSubstr("server must be an integer in [0, 2)"));
  // Both shares of 5 epochs (94 batches each) applied, each push once (asp: a version each).
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  std::vector<int64_t> account = ServerAccount(log0);
  EXPECT_EQ(account[3], 5 * 94) << log0;
  EXPECT_EQ(account[4], 5 * 94);
  EXPECT_EQ(account[1] + account[2], account[3] + account[4]) << "applied or discarded, once";
  EXPECT_EQ(account[0], account[1]);
  // The learners resent what lost its acknowledgement; the servers took every resend as a
  // duplicate, and applied the same pushes, each of them once.
  const int64_t resent = Sum(Numbers(log0 + log1, "(\\d+) pushes resent"));
  EXPECT_GT(resent, 0) << log0 << log1;
  int64_t duplicates = 0;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string log = ServerLog(id, shard);
    auto shard_account = ShardAccounts(log);
    ASSERT_EQ(shard_account.size(), 1u) << log;
    EXPECT_EQ(shard_account[0][0] + shard_account[0][1], 2 * 5 * 94) << log;
    EXPECT_EQ(shard_account[0][3], 5 * 94);
    EXPECT_EQ(shard_account[0][4], 5 * 94);
    duplicates += shard_account[0][2];
  }
  EXPECT_EQ(duplicates, resent);
  std::cout << "sharded over 2 servers: " << account[1] << " gradients applied, " << resent
            << " pushes resent after a dropped acknowledgement, " << duplicates
            << " duplicates acknowledged; final test accuracy "
            << done["models"]["final"].value("test_accuracy", 0.0) << "\n";
}

TEST_F(ScaleOutTest, AKilledLearnerIsReplacedAndGoesOnFromItsLastAppliedPush) {
  const std::string id = Submit(
      "sharded", kModel +
                     "training: {epochs: 60, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: "
                     "{servers: 2, consistency: ssp, staleness: 2}}\n"
                     "resources: {learners: 2, cpus: 1, placement: spread}\n");
  const int64_t pid1 = KillLearner1AtStep(id, 1500);
  json done = WaitFor(id, {"COMPLETED"}, 900);
  EXPECT_EQ(done["attempt"], 1) << HistoryText(done);
  EXPECT_THAT(HistoryText(done), HasSubstr("learner 1 replaced (pid " + std::to_string(pid1)));
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  std::vector<int64_t> account = ServerAccount(log0);
  EXPECT_EQ(account[3], 60 * 94);
  EXPECT_EQ(account[4], 60 * 94);
  EXPECT_EQ(account[1] + account[2], account[3] + account[4]) << "applied or discarded, once";
  // The replacement goes on where the servers had its predecessor: after its last push every
  // shard applied (one that reached a single shard is a duplicate there when it is sent again).
  auto starts = Numbers(log1, "training positions (\\d+) to (\\d+) of this learner's share");
  ASSERT_EQ(starts.size(), 2u) << log1;
  EXPECT_GT(starts[1][0], 0);
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
}

TEST_F(ScaleOutTest, AHaltedJobCheckpointsFromItsServersAndResumesWithEveryBatchAppliedOnce) {
  const std::string id = Submit(
      "sharded", kModel +
                     "training: {epochs: 40, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: "
                     "{servers: 2, consistency: bsp}}\n"
                     "resources: {learners: 2, cpus: 1, placement: spread}\n");
  weftd_->WaitForJobWhere(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 1500; }, 300, "step 1500");
  ASSERT_EQ(weftd_->Cli({"halt", id}).exit_code, 0);
  // Rank 0 checkpoints from the servers, then shuts them down: each logs its account and exits.
  for (int i = 0; i < 300; ++i) {
    if (ServerLog(id, 0).find("shard account") != std::string::npos &&
        ServerLog(id, 1).find("shard account") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(weftd_->Cli({"resume", id}).exit_code, 0);
  json done = WaitFor(id, {"COMPLETED"}, 600);
  EXPECT_EQ(done["attempt"], 2) << HistoryText(done);
  // Where each shard stood in the checkpoint, and what each applied after it.
  ExpectEachShardAppliedTheRest(id, 40, 1500, 2);
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
}

TEST_F(ScaleOutTest, AKilledServerRestartsTheJobFromItsCheckpointWithEachBatchAppliedOnce) {
  const std::string id = Submit(
      "sharded", kModel +
                     "training: {epochs: 40, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: "
                     "{servers: 2}}\n"
                     "resources: {learners: 2, cpus: 1, placement: spread}\n"
                     "checkpoint: {every_steps: 1000, every_seconds: 0}\n");
  json running = weftd_->WaitForJobWhere(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 2500; }, 300, "step 2500");
  ASSERT_EQ(running["servers"].size(), 2u) << running.dump(2);
  EXPECT_EQ(running["servers"][1]["index"], 1);
  EXPECT_THAT(running["servers"][1].value("address", ""), HasSubstr("127.0.0.1:"));
  EXPECT_THAT(weftd_->Cli({"show", id}).output, HasSubstr("servers:  0 on node-"));
  ASSERT_EQ(kill(static_cast<pid_t>(running["servers"][1]["pid"].get<int64_t>()), SIGKILL), 0);
  json done = WaitFor(id, {"COMPLETED"}, 600);
  const std::string history = HistoryText(done);
  EXPECT_EQ(done["attempt"], 2) << history;
  EXPECT_THAT(history, HasSubstr("parameter server 1 killed by signal 9"));
  // Each shard of the second attempt applied exactly what its checkpoint did not hold (the
  // killed server's log has no account of the first).
  ExpectEachShardAppliedTheRest(id, 40, 1000, 0);
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.80);
}

}  // namespace
}  // namespace weft
