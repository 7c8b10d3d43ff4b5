// Tenant code in containers, end to end through a real weftd (started from a terminal, as an
// operator would), real learners and podman: a TorchScript model that reaches for weftd's admin
// token and writes outside its job, and a program that tries every way out — weftd's environment,
// its data directory, another tenant's job, the terminal, a user namespace, weftd's ports, files
// outside its work directory, a fork bomb, memory past its request — are denied each time, and
// weftd and the other jobs carry on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "common/files.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"
#include "train/torchscript_fixture.h"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPidsLimit = 256;

// Each test runs under podman (the default) and under bubblewrap (weftd --runtime bwrap).
class ContainerTest : public testing::WeftdTestWithParam<std::string> {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("container");
    o.containers = true;
    o.terminal = true;
    o.args = {"--learner-pids-limit", std::to_string(kPidsLimit), "--runtime", GetParam()};
    return o;
  }
  void SetUp() override {
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_THAT(weftd_->log(), HasSubstr("runtime " + GetParam() + ": "))
        << "podman and bubblewrap are installed by scripts/install-deps.sh, and "
           "scripts/build-runtime-image.sh builds podman's image";
    ASSERT_THAT(weftd_->log(), Not(HasSubstr("cannot run learners"))) << weftd_->log();
  }
  // Submits a command job running `program` (a Python file) with `args` as the default tenant.
  std::string SubmitProgram(const std::string& name, const std::string& program,
                            const std::vector<std::string>& args, const std::string& extra = "") {
    const std::string code = Archive(name + "-code", {Write(name + ".py", program)});
    std::string command = "[python3, " + name + ".py";
    for (const std::string& a : args) command += ", \"" + a + "\"";
    command += "]";
    const std::string manifest = Write(name + ".yaml", "name: " + name + "\ncommand: " + command +
                                                           "\ncode: " + name + "-code\n" + extra);
    auto r = weftd_->Cli({"submit", manifest, "--upload", name + "-code=" + code});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return testing::SubmittedJobId(r.output);
  }
  json Settled(const std::string& id, int timeout_s) {
    return WaitFor(id, {"COMPLETED", "FAILED"}, timeout_s);
  }
  // Every learner log and weftd's own log, together.
  std::string AllLogs(const std::string& id) {
    std::string all = weftd_->log();
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/data/jobs/" + id + "/logs")) {
      std::ifstream in(e.path());
      all += std::string((std::istreambuf_iterator<char>(in)), {});
    }
    return all;
  }
};

// The issue's first finding: a TorchScript model read weftd's admin token into its log and wrote
// where weftd's user can. In its container neither is there to reach.
TEST_P(ContainerTest, ATenantsTorchScriptReadsNoSecretAndWritesNothingOutsideItsJob) {
  const std::string token_path = dir_ + "/data/admin.token";
  const std::string host_tmp = "/tmp/weft-escape-" + std::to_string(getpid());
  // It writes a file in /tmp (its container's own), then reads weftd's admin token (not in its
  // container at all): no TorchScript can catch the error, so the job fails there.
  torch::jit::Module m = testing::MakeTorchScriptMlp(32);
  m.define(R"(
    def leak(self, x):
        # dtype 0 is torch.uint8
        w = torch.from_file(")" +
           host_tmp + R"(", True, 8, dtype=0)
        w.fill_(65)
        t = torch.from_file(")" +
           token_path + R"(", False, 69, dtype=0)
        print("TOKEN-BYTES", t)
        return x
  )");
  // forward calls leak first: the shape check before training runs it.
  torch::jit::Module hostile("Hostile");
  hostile.register_module("net", m);
  hostile.register_attribute("training", c10::BoolType::get(), true);
  hostile.define(R"(
    def forward(self, x):
        return self.net.forward(self.net.leak(x))
  )");
  const std::string net = dir_ + "/hostile.pt";
  hostile.save(net);
  const std::string manifest = Write("ts.yaml", R"(name: hostile-torchscript
model: {torchscript: hostile.pt}
data: {train_samples: 640, test_samples: 100}
training: {epochs: 1, threads: 1}
resources: {cpus: 1, memory_mb: 1024}
)");
  auto r = weftd_->Cli({"submit", manifest, "--upload", "hostile.pt=" + net});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string id = testing::SubmittedJobId(r.output);
  const json done = Settled(id, 180);
  EXPECT_EQ(done.value("state", ""), "FAILED") << done.dump(2);
  const std::string logs = AllLogs(id);
  EXPECT_THAT(logs, Not(HasSubstr("TOKEN-BYTES"))) << "the token file is not in the container";
  EXPECT_THAT(logs, HasSubstr(token_path)) << "the model tried it, and the learner said so";
  EXPECT_FALSE(std::filesystem::exists(host_tmp)) << "its /tmp is its container's own";
  std::filesystem::remove(host_tmp);
}

// A program that tries every way out of its container, started by a weftd that has a terminal.
TEST_P(ContainerTest, AProgramIsDeniedEverythingThatIsNotItsJob) {
  // Another tenant's job, halted while queued: its directory exists.
  ASSERT_EQ(weftd_->CliAs(weftd_->admin_token(), {"tenant", "create", "other"}).exit_code, 0);
  auto tok = weftd_->CliAs(weftd_->admin_token(), {"token", "create", "other"});
  std::smatch m;
  const std::string tok_out = tok.output;
  ASSERT_TRUE(std::regex_search(tok_out, m, std::regex("weft_[0-9a-f]{64}"))) << tok_out;
  auto other = weftd_->CliAs(m[0].str(), {"submit", Write("other.yaml",
                                                          "name: other\nmodel: {architecture: "
                                                          "mlp}\ntraining: {epochs: 1}\n"
                                                          "priority: low\n")});
  const std::string other_id = testing::SubmittedJobId(other.output);
  ASSERT_FALSE(other_id.empty()) << other.output;
  ASSERT_EQ(weftd_->CliAs(m[0].str(), {"halt", other_id}).exit_code, 0);
  const std::string data_dir = dir_ + "/data";
  const std::string coordinator = *ReadFile(data_dir + "/coordinator.addr");
  const int coordinator_port = std::stoi(coordinator.substr(coordinator.rfind(':') + 1));

  const std::string probe = R"(import ctypes, fcntl, os, socket, subprocess, sys, termios
def attempt(what, fn):
    try:
        fn()
        print("ALLOWED", what, flush=True)
    except Exception as e:
        print("DENIED", what + ":", type(e).__name__, e, flush=True)
data_dir, other_dir, weftd_pid = sys.argv[1], sys.argv[2], sys.argv[3]
rest, coord = int(sys.argv[4]), int(sys.argv[5])
print("uid", os.getuid(), "pid", os.getpid(), flush=True)  # before it tries a user namespace
attempt("weftd's environment", lambda: open("/proc/%s/environ" % weftd_pid, "rb").read())
attempt("admin.token", lambda: open(os.path.join(data_dir, "admin.token")).read())
attempt("weftd's store", lambda: open(os.path.join(data_dir, "weft.db"), "rb").read())
attempt("weftd's learner key", lambda: open(os.path.join(data_dir, "learner.key")).read())
try:
    print("jobs seen:", sorted(os.listdir(os.path.join(data_dir, "jobs"))), flush=True)
except OSError as e:
    print("jobs seen: none,", type(e).__name__, flush=True)
attempt("another tenant's job", lambda: os.listdir(other_dir))
def tiocsti():
    fd = os.open("/dev/tty", os.O_RDWR)
    for ch in b"INJECTED\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
attempt("the terminal", tiocsti)
def userns():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
attempt("a user namespace", userns)
attempt("unshare -Ur", lambda: subprocess.run(["unshare", "-Ur", "true"], check=True,
                                              stderr=subprocess.DEVNULL))
attempt("weftd's REST port", lambda: socket.create_connection(("127.0.0.1", rest), timeout=3))
attempt("weftd's coordinator", lambda: socket.create_connection(("127.0.0.1", coord), timeout=3))
for path in ["/etc/escape", "/usr/escape", os.path.join(os.environ["WORK_DIR"], "..", "escape")]:
    attempt("writing " + path, lambda: open(path, "w").write("x"))
open("model.txt", "w").write("m")
with open(os.environ["WEFT_METRICS_FILE"], "a") as f:
    f.write('{"model": "model.txt", "test_accuracy": 0.5, "step": 1}\n')
)";
  const std::string id =
      SubmitProgram("probe", probe,
                    {data_dir, data_dir + "/jobs/" + other_id, std::to_string(weftd_->pid()),
                     std::to_string(weftd_->port()), std::to_string(coordinator_port)});
  const json done = Settled(id, 180);
  EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
  const std::string log = weftd_->LearnerLog(id, 0);
  std::vector<std::string> denied = {
      "weftd's environment",  "admin.token",        "weftd's store",     "weftd's learner key",
      "another tenant's job", "the terminal",       "weftd's REST port", "weftd's coordinator",
      "writing /etc/escape",  "writing /usr/escape"};
  // Only podman's seccomp profile refuses a user namespace (docs/security.md).
  if (GetParam() == "podman") denied.insert(denied.end(), {"a user namespace", "unshare -Ur"});
  for (const std::string& what : denied) {
    EXPECT_THAT(log, HasSubstr("DENIED " + what)) << log;
    EXPECT_THAT(log, Not(HasSubstr("ALLOWED " + what))) << log;
  }
  EXPECT_THAT(log, Not(HasSubstr("ALLOWED writing"))) << log;
  // Only its own job's files: podman mounts its job's directories alone; bubblewrap's sandbox
  // (the command job's program under a host supervisor) makes the jobs directory search-only.
  EXPECT_THAT(log, HasSubstr(GetParam() == "podman" ? "jobs seen: ['" + id + "']"
                                                    : "jobs seen: none, PermissionError"));
  EXPECT_THAT(log, Not(HasSubstr("'" + other_id + "'"))) << "another tenant's job is not seen";
  EXPECT_THAT(weftd_->TerminalOutput(), Not(HasSubstr("INJECTED")));
  EXPECT_FALSE(std::filesystem::exists(data_dir + "/jobs/" + id + "/work/escape"));
  // Its own uid, one of the jobs' range (not root, not weftd's), and a PID namespace of its own.
  std::smatch uid;
  ASSERT_TRUE(std::regex_search(log, uid, std::regex("uid (\\d+) pid (\\d+)"))) << log;
  EXPECT_GE(std::stoll(uid[1].str()), 1000000000) << log;
  EXPECT_LT(std::stoll(uid[2].str()), 100) << "pid in its own namespace";
}

// A fork bomb stops at the learner's pids limit; weftd and another tenant's job are unharmed.
TEST_P(ContainerTest, AForkBombStopsAtThePidsLimitAndHarmsNoOne) {
  const std::string bomb = R"(import os, signal, sys, time
children = []
try:
    while len(children) < 100000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as e:
    print("fork failed after", len(children), "children:", e, flush=True)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
open("model.txt", "w").write("m")
with open(os.environ["WEFT_METRICS_FILE"], "a") as f:
    f.write('{"model": "model.txt", "test_accuracy": 0.5, "step": 1}\n')
)";
  const std::string id = SubmitProgram("bomb", bomb, {});
  const std::string smoke =
      weftd_->Submit(std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-mlp-smoke.yaml");
  const json done = Settled(id, 180);
  EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
  const std::string log = weftd_->LearnerLog(id, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("fork failed after (\\d+) children"))) << log;
  EXPECT_LT(std::stoi(m[1].str()), kPidsLimit);
  EXPECT_GT(std::stoi(m[1].str()), kPidsLimit / 2);
  EXPECT_TRUE(weftd_->Alive());
  const json other = Settled(smoke, 180);
  EXPECT_EQ(other.value("state", ""), "COMPLETED") << testing::HistoryText(other) << "\n"
                                                   << weftd_->LearnerLog(smoke, 0);
}

// Memory past resources.memory_mb: the kernel kills the program, and the job fails naming it.
TEST_P(ContainerTest, MemoryPastTheRequestIsKilledAndTheReasonSaysSo) {
  const std::string hog = R"(chunks = []
for i in range(64):
    chunks.append(bytearray(32 << 20))
    print("holding", (i + 1) * 32, "MiB", flush=True)
)";
  const std::string id = SubmitProgram("hog", hog, {}, "resources: {memory_mb: 256}\n");
  const json done = Settled(id, 180);
  EXPECT_EQ(done.value("state", ""), "FAILED") << done.dump(2);
  // The learner's log says what else went wrong (a tar that failed to unpack the code, once).
  EXPECT_THAT(testing::HistoryText(done), HasSubstr("out of memory")) << done.dump(2) << "\n"
                                                                      << weftd_->LearnerLog(id, 0);
  EXPECT_THAT(testing::HistoryText(done), HasSubstr("resources.memory_mb"));
  EXPECT_EQ(done.value("attempt", 0), 1) << "a learner over its memory is not restarted";
}

INSTANTIATE_TEST_SUITE_P(Runtimes, ContainerTest, ::testing::Values("podman", "bwrap"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace weft
