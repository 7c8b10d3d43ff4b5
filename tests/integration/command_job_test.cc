// Command jobs end to end through a real weftd, the real CLI, real learners and Debian's PyTorch:
// the example program (examples/pytorch-command/train.py with sdk/python/weft_job.py) trains as a
// 2-learner gang the torchrun way, survives kill -9 of one of its processes by resuming from its
// own checkpoint, and hands back a delivered and a final model; and a program that tries to
// reach what is not its job's is denied by its container (or, under weftd --runtime none, the
// sandbox) each time. container_test holds the rest of the containers' denials.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

class CommandJobTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("command");
    o.fashion_mnist = true;
    return o;
  }
  void SetUp() override {
    const char* runtime = getenv("WEFT_TEST_RUNTIME");
    unconfined_ = runtime != nullptr && std::string(runtime) == "none";
    if (unconfined_ && !std::filesystem::exists("/usr/bin/bwrap")) {
      GTEST_SKIP() << "bubblewrap is not installed (scripts/install-deps.sh installs it)";
    }
    WeftdTest::SetUp();
  }

  json WaitSettled(const std::string& id, int timeout_s) {
    return WaitFor(id, {"COMPLETED", "FAILED"}, timeout_s);
  }
  // Pids of job `id`'s rank `rank` running the program `script` (not weft-learner, not bwrap).
  static std::vector<int64_t> ProgramPids(const std::string& id, int rank,
                                          const std::string& script) {
    std::vector<int64_t> out;
    for (int64_t pid : testing::LearnerPids(id, rank)) {
      std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
      std::string cmd((std::istreambuf_iterator<char>(f)), {});
      if (cmd.rfind("python3", 0) == 0 || cmd.rfind("/usr/bin/python3", 0) == 0) {
        if (cmd.find(script) != std::string::npos) out.push_back(pid);
      }
    }
    return out;
  }

  // weftd --runtime none (WEFT_TEST_RUNTIME): programs in bubblewrap's sandbox, not containers.
  bool unconfined_ = false;
};

TEST_F(CommandJobTest, TheExampleTrainsAsAGangResumesAfterAKillAndDeliversBothModels) {
  const std::string code =
      Archive("fmnist-code", {std::string(WEFT_SOURCE_DIR) + "/examples/pytorch-command/train.py",
                              std::string(WEFT_SOURCE_DIR) + "/sdk/python/weft_job.py"});
  const std::string manifest = Write("job.yaml", R"(name: pytorch-gang
command: [python3, train.py, --epochs, "3", --train-samples, "6400", --test-samples, "1000",
          --checkpoint-steps, "20"]
code: fmnist-code
data: {dataset: fashion-mnist}
resources: {learners: 2, cpus: 1}
targets: {deliver: 0.6}
)");
  const std::string id = SubmitAs(weftd_->token(), manifest, {"--upload", "fmnist-code=" + code});
  ASSERT_FALSE(id.empty());
  // Each epoch is 50 steps; at step 50 the checkpoint of step 40 is committed.
  WaitUntil(
      id, [](const json& j) { return j["progress"].value("step", 0) >= 50; }, 300, "step 50");
  std::vector<int64_t> rank1 = ProgramPids(id, 1, "train.py");
  ASSERT_EQ(rank1.size(), 1u) << "rank 1's python3 train.py";
  ASSERT_EQ(::kill(static_cast<pid_t>(rank1[0]), SIGKILL), 0);

  const json done = WaitSettled(id, 400);
  ASSERT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2) << Log(id, 0);
  EXPECT_GE(done["attempt"].get<int>(), 2);
  std::string history;
  for (const auto& e : done["history"]) history += e["reason"].get<std::string>() + "\n";
  EXPECT_THAT(history, HasSubstr("from the checkpoint at step"));
  const std::string log0 = Log(id, 0), log1 = Log(id, 1);
  EXPECT_THAT(log1, HasSubstr("the command was killed by signal 9"))
      << "rank 1's supervisor saw its program die: " << log1;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log0, m, std::regex("rank 0: resumed at epoch \\d+ step (\\d+)")))
      << log0;
  EXPECT_GE(std::stoi(m[1].str()), 20) << "resumed from a checkpoint the program announced";
  EXPECT_THAT(log0, HasSubstr(unconfined_ ? "(in the sandbox)" : "(in a container)"));
  EXPECT_THAT(log1, Not(HasSubstr("checkpoint at step"))) << "only rank 0's are committed";

  // Metrics from the program's report() calls, and both models.
  json metrics = Get("/v1/jobs/" + id + "/metrics");
  int evals = 0, train_points = 0;
  for (const auto& p : metrics["points"]) {
    evals += p.contains("test_accuracy");
    train_points += p.contains("train_loss") && p["train_loss"].get<double>() > 0;
  }
  EXPECT_GE(evals, 3);
  EXPECT_GE(train_points, 2);
  ASSERT_TRUE(done["models"].contains("delivered")) << done.dump(2);
  ASSERT_TRUE(done["models"].contains("final")) << done.dump(2);
  EXPECT_GT(done["models"]["final"]["test_accuracy"].get<double>(), 0.7);
  const std::string model = dir_ + "/final.pt";
  auto dl = weftd_->Cli({"download", id, "--final", "-o", model});
  ASSERT_EQ(dl.exit_code, 0) << dl.output;
  auto py = testing::RunCommand({"/usr/bin/python3", "-c",
                                 "import sys, torch\n"
                                 "m = torch.jit.load(sys.argv[1]); m.eval()\n"
                                 "print(tuple(m(torch.zeros(4, 1, 28, 28)).shape))\n",
                                 model});
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_THAT(py.output, HasSubstr("(4, 10)"));
}

TEST_F(CommandJobTest, TheSandboxDeniesWhatIsNotTheJobsAndNothingWrittenEscapes) {
  // Another tenant's job, halted while queued: its directory exists.
  const std::string other = NewTenant("other");
  ASSERT_FALSE(other.empty());
  const std::string other_id = SubmitAs(other, Write("other.yaml",
                                                     "name: other\nmodel: {architecture: mlp}\n"
                                                     "training: {epochs: 1}\npriority: low\n"));
  ASSERT_EQ(weftd_->CliAs(other, {"halt", other_id}).exit_code, 0);
  const std::string data_dir = dir_ + "/data";
  const std::string other_dir = data_dir + "/jobs/" + other_id;
  ASSERT_TRUE(std::filesystem::exists(other_dir));

  const std::string probe = Write("probe.py", R"(import os, socket, sys
def attempt(what, fn):
    try:
        fn()
        print("ALLOWED", what, flush=True)
    except Exception as e:
        print("DENIED", what + ":", type(e).__name__, e, flush=True)
data_dir, other_dir, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
attempt("admin.token", lambda: open(os.path.join(data_dir, "admin.token")).read())
attempt("another tenant's job", lambda: os.listdir(other_dir))
attempt("/etc/shadow", lambda: open("/etc/shadow").read())
attempt("weftd's REST port", lambda: socket.create_connection(("127.0.0.1", port), timeout=3))
attempt("writing above WORK_DIR", lambda: open(os.path.join(os.environ["WORK_DIR"], "..", "escape"), "w"))
for path in ["/tmp/weft-escape-probe", os.path.join(data_dir, "escape"), "mine.txt"]:
    try:
        with open(path, "w") as f:
            f.write("x")
        print("wrote", path, flush=True)
    except OSError as e:
        print("could not write", path, e, flush=True)
# Its own data set (data.artifact), where DATA_DIR says.
with open(os.path.join(os.environ["DATA_DIR"], "data.pt")) as f:
    print("own data:", os.environ["WEFT_DATA_FORMAT"], f.read(), flush=True)
# A job hands back a model: announce one by hand, as weft_job.save_model would.
with open(os.environ["WEFT_METRICS_FILE"], "a") as f:
    f.write('{"model": "mine.txt", "test_accuracy": 0.5, "step": 1}\n')
)");
  const std::string code = Archive("probe-code", {probe});
  const std::string manifest =
      Write("probe.yaml", "name: probe\ncommand: [python3, probe.py, \"" + data_dir + "\", \"" +
                              other_dir + "\", \"" + std::to_string(weftd_->port()) +
                              "\"]\ncode: probe-code\ndata: {artifact: probe-data}\n");
  // Another tenant cannot name this tenant's code (artifacts are per tenant).
  auto up = weftd_->Cli({"artifact", "upload", code, "--name", "probe-code"});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  auto refused = weftd_->CliAs(other, {"submit", manifest});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("code: no artifact 'probe-code'"));

  const std::string id = SubmitAs(weftd_->token(), manifest,
                                  {"--upload", "probe-data=" + Write("data.pt", "0123456789")});
  const json done = WaitSettled(id, 120);
  EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
  const std::string log = Log(id, 0);
  for (const char* what : {"admin.token", "another tenant's job", "/etc/shadow",
                           "weftd's REST port", "writing above WORK_DIR"}) {
    EXPECT_THAT(log, HasSubstr(std::string("DENIED ") + what)) << log;
    EXPECT_THAT(log, Not(HasSubstr(std::string("ALLOWED ") + what))) << log;
  }
  EXPECT_THAT(log, HasSubstr("wrote mine.txt"));
  EXPECT_THAT(log, HasSubstr("own data: tensors 0123456789"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/weft-escape-probe"));
  EXPECT_FALSE(std::filesystem::exists(data_dir + "/escape"));
  EXPECT_FALSE(std::filesystem::exists(data_dir + "/jobs/" + id + "/work/escape"));
  EXPECT_TRUE(std::filesystem::exists(data_dir + "/jobs/" + id + "/work/rank-0/mine.txt"));
}

// A tenant's program prints an OSC 52 sequence (which would write the operator's clipboard): on
// a terminal `weft logs` shows it and the terminal is not sent it; --raw and a pipe get the
// bytes as the program printed them.
TEST_F(CommandJobTest, ALogsEscapeSequencesAreShownOnATerminalNotSentToIt) {
  const std::string program = Write(
      "noisy.py", "import sys\nsys.stdout.write('before \\x1b]52;c;b3duZWQ=\\x07 after\\n')\n");
  const std::string code = Archive("noisy-code", {program});
  const std::string manifest =
      Write("noisy.yaml", "name: noisy\ncommand: [python3, noisy.py]\ncode: noisy-code\n");
  const std::string id = SubmitAs(weftd_->token(), manifest, {"--upload", "noisy-code=" + code});
  // It hands back no model, so the job fails; its log is what this test reads.
  const json done = WaitSettled(id, 180);
  ASSERT_EQ(done.value("state", ""), "FAILED") << done.dump(2);
  const std::string osc52 = "\x1b]52;c;b3duZWQ=\x07";

  testing::CommandResult shown = weftd_->CliOnTerminal({"logs", id});
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("before ^[]52;c;b3duZWQ=^G after"));
  EXPECT_THAT(shown.output, Not(HasSubstr("\x1b"))) << "an escape reached the terminal";

  testing::CommandResult raw = weftd_->CliOnTerminal({"logs", id, "--raw"});
  EXPECT_THAT(raw.output, HasSubstr("before " + osc52 + " after"));
  EXPECT_THAT(Log(id, 0), HasSubstr("before " + osc52 + " after")) << "a pipe gets the bytes";
}

}  // namespace
}  // namespace weft
