// The container runtime's parts on their own: weft's seccomp profile derived from the engine's,
// the podman command line a container spec becomes (what it drops, what it mounts, where its
// environment goes), the network namespaces of gangs, and what a job attempt's learners share
// (executor/job_isolation.h) — uids per job, one setup per attempt, all of it gone with the last.
#include "executor/container_runtime.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "executor/job_isolation.h"
#include "executor/learner_container.h"
#include "executor/network_namespaces.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kEngineProfile[] = R"({
  "defaultAction": "SCMP_ACT_ERRNO",
  "syscalls": [
    {"names": ["read", "write", "clone", "clone3", "unshare", "ioctl", "setns"],
     "action": "SCMP_ACT_ALLOW", "args": []},
    {"names": ["setns"], "action": "SCMP_ACT_ALLOW", "args": [],
     "includes": {"caps": ["CAP_SYS_ADMIN"]}}
  ]
})";

// The rules of `profile` that name `call`, as JSON.
std::vector<nlohmann::json> RulesFor(const nlohmann::json& profile, const std::string& call) {
  std::vector<nlohmann::json> out;
  for (const auto& r : profile["syscalls"]) {
    for (const auto& n : r["names"]) {
      if (n == call) out.push_back(r);
    }
  }
  return out;
}

TEST(SeccompProfileTest, NoNewUserNamespaceAndNoTerminalInputAndTheRestAsTheEngineHasIt) {
  auto text = SeccompProfile(kEngineProfile);
  ASSERT_TRUE(text.ok()) << text.status();
  nlohmann::json p = nlohmann::json::parse(*text);
  // read, write and setns as they were.
  EXPECT_EQ(RulesFor(p, "read").size(), 1u);
  EXPECT_EQ(RulesFor(p, "setns").size(), 2u);
  // unshare and clone: allowed only without CLONE_NEWUSER, refused (EPERM) with it.
  for (const char* call : {"unshare", "clone"}) {
    std::vector<nlohmann::json> rules = RulesFor(p, call);
    ASSERT_EQ(rules.size(), 2u) << call;
    for (const auto& r : rules) {
      ASSERT_EQ(r["args"].size(), 1u) << r.dump();
      EXPECT_EQ(r["args"][0]["value"], 0x10000000) << r.dump();
      EXPECT_EQ(r["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
      if (r["action"] == "SCMP_ACT_ALLOW") {
        EXPECT_EQ(r["args"][0]["valueTwo"], 0);
      } else {
        EXPECT_EQ(r["errnoRet"], 1);
      }
    }
  }
  // clone3 hides its flags from the filter: ENOSYS, so the C library falls back to clone.
  std::vector<nlohmann::json> clone3 = RulesFor(p, "clone3");
  ASSERT_EQ(clone3.size(), 1u);
  EXPECT_EQ(clone3[0]["action"], "SCMP_ACT_ERRNO");
  EXPECT_EQ(clone3[0]["errnoRet"], 38);
  // ioctl: everything but TIOCSTI (0x5412) and TIOCLINUX (0x541C).
  bool allow_checks_both = false;
  for (const auto& r : RulesFor(p, "ioctl")) {
    ASSERT_FALSE(r["args"].empty()) << "no unconditional ioctl left: " << r.dump();
    if (r["action"] == "SCMP_ACT_ALLOW") {
      allow_checks_both = r["args"].size() == 2 && r["args"][0]["value"] == 0x5412 &&
                          r["args"][1]["value"] == 0x541C && r["args"][0]["op"] == "SCMP_CMP_NE";
    }
  }
  EXPECT_TRUE(allow_checks_both) << p.dump(1);
  EXPECT_FALSE(SeccompProfile("{\"defaultAction\": 1}").ok());
  EXPECT_FALSE(SeccompProfile("not json").ok());
}

TEST(SeccompProfileTest, TheInstalledEnginesProfileTakesTheSameChanges) {
  auto engine = ReadFile("/usr/share/containers/seccomp.json");
  if (!engine.ok()) GTEST_SKIP() << "podman's profile is not installed";
  auto text = SeccompProfile(*engine);
  ASSERT_TRUE(text.ok()) << text.status();
  nlohmann::json p = nlohmann::json::parse(*text);
  for (const char* call : {"unshare", "clone", "clone3", "ioctl"}) {
    for (const auto& r : RulesFor(p, call)) {
      if (r["action"] == "SCMP_ACT_ALLOW") {
        EXPECT_FALSE(r["args"].empty()) << call << " is still allowed whatever its arguments";
      }
    }
  }
}

TEST(ContainersConfTest, RuncAndLimitsThisProcessMaySet) {
  const std::string conf = ContainersConf();
  EXPECT_THAT(conf, HasSubstr("runtime = \"runc\""));
  EXPECT_THAT(conf, HasSubstr("nproc=32768:32768"));
  rlimit nofile{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  if (nofile.rlim_max != RLIM_INFINITY && nofile.rlim_max <= 1048576) {
    EXPECT_THAT(conf, HasSubstr("nofile=" + std::to_string(nofile.rlim_max)));
  }
}

class PodmanCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/podman", X_OK) != 0) GTEST_SKIP() << "podman is not installed";
    char tmpl[] = "/tmp/weft-podman-XXXXXX";
    dir_ = mkdtemp(tmpl);
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/seccomp.json", "{}").ok());
    auto p = PodmanRuntime::Open({"/usr/bin/podman", dir_});
    ASSERT_TRUE(p.ok()) << p.status();
    podman_ = *std::move(p);
    spec_.name = "weft-job-x-a1-r0-1";
    spec_.image = "localhost/weft/runtime:latest";
    spec_.argv = {"/opt/weft/bin/weft-learner"};
    spec_.env = {{"PATH", "/usr/bin"}, {"WEFT_JOB_CREDENTIAL", "s3cret"}};
    spec_.mounts = {{"/data/jobs/x/checkpoints", "/data/jobs/x/checkpoints", false},
                    {"/data/jobs/x/spec.json", "/data/jobs/x/spec.json", true}};
    spec_.uid = 1000000007;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<PodmanRuntime> podman_;
  ContainerSpec spec_;
};

TEST_F(PodmanCommandTest, EveryContainerIsConfinedAndItsSecretsStayOffTheCommandLine) {
  auto c = podman_->Command(spec_);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<std::string>& a = c->argv;
  for (const char* flag :
       {"--rm", "--init", "--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges",
        "--network=none", "--user=1000000007:1000000007", "--log-driver=passthrough",
        "--pull=never"}) {
    EXPECT_THAT(a, Contains(flag));
  }
  EXPECT_THAT(a, Contains("--security-opt=seccomp=" + dir_ + "/seccomp.json"));
  EXPECT_THAT(a, Contains("--volume=/data/jobs/x/checkpoints:/data/jobs/x/checkpoints:rw"));
  EXPECT_THAT(a, Contains("--volume=/data/jobs/x/spec.json:/data/jobs/x/spec.json:ro"));
  // The image, then the program, last.
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[a.size() - 2], spec_.image);
  EXPECT_EQ(a.back(), "/opt/weft/bin/weft-learner");
  // The credential travels by name; its value is in the engine process's environment only.
  EXPECT_THAT(a, Contains("--env=WEFT_JOB_CREDENTIAL"));
  for (const std::string& arg : a) EXPECT_THAT(arg, Not(HasSubstr("s3cret")));
  EXPECT_THAT(c->env, Contains("WEFT_JOB_CREDENTIAL=s3cret"));
  EXPECT_THAT(c->env, Contains("CONTAINERS_CONF=" + dir_ + "/containers.conf"));
  // PATH is the engine's own too: the container's goes by value.
  EXPECT_THAT(a, Contains("--env=PATH=/usr/bin"));
}

TEST_F(PodmanCommandTest, AGangsNamespaceLimitsAndDevicesGoThrough) {
  spec_.network_namespace = "/data/run/netns/job-x.a1";
  spec_.cgroup_parent = "/weftd/weft-1/job-x.a1.r0";
  spec_.cpus = 1.5;
  spec_.cpuset = {0, 1};
  spec_.pids_limit = 128;
  spec_.devices = {"nvidia.com/gpu=0"};
  auto c = podman_->Command(spec_);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const std::string flag :
       {"--network=ns:/data/run/netns/job-x.a1", "--cgroup-parent=/weftd/weft-1/job-x.a1.r0",
        "--cpus=1.5", "--cpuset-cpus=0,1", "--pids-limit=128", "--device=nvidia.com/gpu=0"}) {
    EXPECT_THAT(c->argv, Contains(flag));
  }
  EXPECT_THAT(c->argv, Not(Contains("--network=none")));
}

TEST_F(PodmanCommandTest, WhatTheCommandLineWouldMisreadIsRefused) {
  ContainerSpec bad = spec_;
  bad.name = "a;rm -rf /";
  EXPECT_FALSE(podman_->Command(bad).ok());
  bad = spec_;
  bad.mounts = {{"/data/a:b", "/data/a:b", true}};
  EXPECT_FALSE(podman_->Command(bad).ok());
  bad = spec_;
  bad.mounts = {{"relative", "/x", true}};
  EXPECT_FALSE(podman_->Command(bad).ok());
  bad = spec_;
  bad.env = {{"BAD NAME", "x"}};
  EXPECT_FALSE(podman_->Command(bad).ok());
  bad = spec_;
  bad.image.clear();
  EXPECT_FALSE(podman_->Command(bad).ok());
}

// Whether loopback is up in the network namespace pinned at `path` (checked by a child that
// joins it).
bool LoopbackUpIn(const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(2);
    const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    if (sock < 0 || ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) _exit(3);
    _exit((ifr.ifr_flags & IFF_UP) ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A learner's container as the local executor starts it (weftd's coordinator at its attempt's
// socket, its gang's network) and as the Slurm executor does (the host's network, weftd over TCP
// with its CA mounted, the memory limit on the container itself).
TEST(LearnerContainerTest, LocalThroughItsSocketSlurmThroughTheHostsNetwork) {
  LearnerLaunch l;
  l.job_id = "job-x";
  l.attempt = 2;
  l.rank = 1;
  l.spec_path = "/data/jobs/job-x/spec.json";
  l.checkpoint_dir = "/data/jobs/job-x/checkpoints";
  l.result_dir = "/data/jobs/job-x/results";
  l.log_dir = "/data/jobs/job-x/logs";
  l.coordinator_address = "10.0.0.1:7000";
  l.coordinator_ca_path = "/data/ca.pem";
  l.memory_limit_mb = 512;
  LearnerContainerOptions o;
  o.image = "localhost/weft/runtime:latest";
  o.learner_binary = "/opt/build/bin/weft-learner";
  AttemptSetup local{1000000003, "/data/run/netns/job-x.a2", "/dev/shm/w/job-x.a2",
                     "/data/run/channels/job-x.a2"};
  auto env = [](const ContainerSpec& s, const std::string& name) {
    for (const auto& [n, v] : s.env) {
      if (n == name) return v;
    }
    return std::string("<unset>");
  };
  auto mounted = [](const ContainerSpec& s, const std::string& target) {
    return std::any_of(s.mounts.begin(), s.mounts.end(),
                       [&](const ContainerMount& m) { return m.target == target; });
  };
  ContainerSpec s = LearnerContainer(l, o, local, "/weftd/job-x.a2.r1", "c1");
  EXPECT_EQ(env(s, "WEFT_COORDINATOR"), "unix:/run/weft/coordinator.sock");
  EXPECT_EQ(env(s, "WEFT_COORDINATOR_CA"), "<unset>") << "a unix socket needs no CA";
  EXPECT_TRUE(mounted(s, kChannelMountPoint));
  EXPECT_FALSE(mounted(s, "/data/ca.pem"));
  EXPECT_FALSE(s.host_network);
  EXPECT_EQ(s.network_namespace, local.network_namespace);
  EXPECT_EQ(s.memory_bytes, 0) << "held by the learner's cgroup";
  EXPECT_EQ(s.argv, std::vector<std::string>{"/opt/weft/bin/weft-learner"});

  o.host_network = true;
  o.own_memory_limit = true;
  AttemptSetup slurm{1000000003, "", "/dev/shm/weft-slurm/job-x.a2", ""};
  s = LearnerContainer(l, o, slurm, "", "c2");
  EXPECT_EQ(env(s, "WEFT_COORDINATOR"), "10.0.0.1:7000");
  EXPECT_EQ(env(s, "WEFT_COORDINATOR_CA"), "/data/ca.pem");
  EXPECT_TRUE(mounted(s, "/data/ca.pem"));
  EXPECT_FALSE(mounted(s, kChannelMountPoint));
  EXPECT_TRUE(s.host_network);
  EXPECT_EQ(s.memory_bytes, int64_t{512} << 20);
}

// `c` started in the background as weftd would (umask 077); its pid.
pid_t Start(RuntimeCommand c) {
  const pid_t pid = fork();
  if (pid == 0) {
    umask(077);
    std::vector<char*> argv, env;
    for (auto& a : c.argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : c.env) env.push_back(e.data());
    env.push_back(nullptr);
    execve(argv[0], argv.data(), env.data());
    _exit(126);
  }
  return pid;
}

// Under bubblewrap the learner runs the host's own binary, which may lie in a directory the
// sandbox covers with an empty tmpfs (a build under /tmp, CI's clone): it is bound at its own path,
// through directories the job's uid may search, and runs as that uid.
TEST(BwrapCommandTest, AProgramUnderACoveredDirectoryIsBoundAndRunsAsTheJobsUid) {
  auto bwrap = BwrapRuntime::Create();
  if (!bwrap.ok()) GTEST_SKIP() << bwrap.status();
  char tmpl[] = "/tmp/weft-bwrap-test-XXXXXX";  // 0700: root's alone on the host
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/build/bin");
  const std::string program = dir + "/build/bin/weft-learner";
  std::filesystem::copy_file("/bin/true", program);

  LearnerLaunch l;
  l.job_id = "job-x";
  l.spec_path = "/bin/true";  // any file that exists: mounted read-only
  LearnerContainerOptions o;
  o.learner_binary = program;
  o.on_image = false;
  AttemptSetup setup{1000000007, "", "", ""};
  ContainerSpec s = LearnerContainer(l, o, setup, "", "c1");
  EXPECT_EQ(s.argv, std::vector<std::string>{program});
  EXPECT_TRUE(std::any_of(s.mounts.begin(), s.mounts.end(), [&](const ContainerMount& m) {
    return m.source == program && m.target == program && m.read_only;
  }));
  // Run as the sandbox would run it, with that mount alone (the job's directories aside).
  ContainerSpec run;
  run.argv = s.argv;
  run.uid = s.uid;
  run.mounts = {{program, program, true}};
  auto c = (*bwrap)->Command(run);
  ASSERT_TRUE(c.ok()) << c.status();
  const pid_t pid = Start(*c);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "status " << status << ": " << absl::StrJoin(c->argv, " ");
  std::filesystem::remove_all(dir);
}

// podman's exit code read as the learner's: a signal where catatonit says one ended it, but
// weft-learner's own 143 (stopped as asked) kept, and the engine's own failures named.
TEST(LearnerContainerTest, TheEnginesExitCodeReadsAsTheLearnersExit) {
  auto read = [](int code) {
    LearnerExit e;
    e.exit_code = code;
    ReadEngineExit(&e);
    return e;
  };
  EXPECT_EQ(read(137).signal, SIGKILL);
  EXPECT_EQ(read(139).signal, SIGSEGV);
  EXPECT_EQ(read(kLearnerExitStopped).signal, 0);
  EXPECT_EQ(read(kLearnerExitStopped).exit_code, kLearnerExitStopped);
  EXPECT_EQ(read(1).exit_code, 1);
  EXPECT_EQ(read(127).exit_code, kLearnerExitUserError);
  EXPECT_THAT(read(127).cause, HasSubstr("image cannot run the learner"));
  EXPECT_EQ(read(125).exit_code, 125) << "worth a restart";
  EXPECT_THAT(read(125).cause, HasSubstr("could not start it"));
}

// The podman command of `spec` started in the background; its pid.
pid_t StartContainer(const PodmanRuntime& podman, const ContainerSpec& spec) {
  auto c = podman.Command(spec);
  return c.ok() ? Start(*c) : -1;
}

// SignalInit with `signal` until it answers other than `while_answer` (at most 60 s).
ContainerRuntime::Signalled SignalUntil(const PodmanRuntime& podman, const std::string& name,
                                        int signal, ContainerRuntime::Signalled while_answer) {
  ContainerRuntime::Signalled answer = while_answer;
  for (int i = 0; i < 6000 && answer == while_answer; ++i) {
    answer = podman.SignalInit(name, signal);
    if (answer == while_answer) usleep(10000);
  }
  return answer;
}

// A learner's container is stopped through its init, never through podman's client: a running
// one gets the signal, and one whose learner died first ends with the learner's own status (a
// client signalled after its container ended would exit 143, hiding the SIGKILL).
TEST(PodmanSignalTest, TheInitGetsTheSignalAndAnEndedContainerKeepsItsOwnStatus) {
  if (geteuid() != 0) GTEST_SKIP() << "rootful podman needs root";
  char tmpl[] = "/tmp/weft-podman-signal-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto podman = PodmanRuntime::Create({"/usr/bin/podman", dir});
  if (!podman.ok()) GTEST_SKIP() << podman.status();
  auto exists = RunCommand({"/usr/bin/podman", "image", "exists", "localhost/weft/runtime:latest"},
                           (*podman)->EngineEnvironment(), 60000);
  if (!exists.ok() || exists->exit_code != 0) GTEST_SKIP() << "no weft/runtime image";
  using Signalled = ContainerRuntime::Signalled;
  ContainerSpec spec;
  spec.image = "localhost/weft/runtime:latest";
  spec.record_init_pid = true;
  auto status_of = [](pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };

  spec.name = absl::StrCat("weft-signal-test-", getpid(), "-running");
  spec.argv = {"sleep", "60"};
  EXPECT_EQ((*podman)->SignalInit(spec.name, SIGTERM), Signalled::kNotStarted);
  pid_t pid = StartContainer(**podman, spec);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(SignalUntil(**podman, spec.name, SIGTERM, Signalled::kNotStarted), Signalled::kInit);
  EXPECT_EQ(status_of(pid), 128 + SIGTERM) << "sleep ended by the SIGTERM its init passed on";
  EXPECT_EQ((*podman)->SignalInit(spec.name, SIGTERM), Signalled::kEnded);
  (*podman)->Forget(spec.name);
  EXPECT_EQ((*podman)->SignalInit(spec.name, SIGTERM), Signalled::kNotStarted);

  spec.name = absl::StrCat("weft-signal-test-", getpid(), "-killed");
  spec.argv = {"sh", "-c", "sleep 1; kill -KILL $$"};
  pid = StartContainer(**podman, spec);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(SignalUntil(**podman, spec.name, 0, Signalled::kNotStarted), Signalled::kInit);
  // The moment its learner is gone, before podman's client has cleaned up and exited.
  ASSERT_EQ(SignalUntil(**podman, spec.name, 0, Signalled::kInit), Signalled::kEnded);
  EXPECT_EQ((*podman)->SignalInit(spec.name, SIGTERM), Signalled::kEnded);
  EXPECT_EQ(status_of(pid), 128 + SIGKILL);
  (*podman)->Forget(spec.name);
  std::filesystem::remove_all(dir);
}

TEST(NetworkNamespacesTest, PinnedWithLoopbackUpAndUnpinned) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  char tmpl[] = "/tmp/weft-netns-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  NetworkNamespaces ns(dir + "/netns");
  auto path = ns.Create("job-x.a1");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(LoopbackUpIn(*path));
  // Made again (an earlier weftd's, adopted): the same one.
  auto again = ns.Create("job-x.a1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *path);
  EXPECT_FALSE(ns.Create("../escape").ok());
  ASSERT_TRUE(ns.Create("job-y.a2").ok());
  EXPECT_EQ(ns.RemoveAllBut({"job-y.a2"}), 1);
  EXPECT_FALSE(std::filesystem::exists(*path));
  EXPECT_TRUE(ns.Remove("job-y.a2").ok());
  EXPECT_TRUE(ns.Remove("job-y.a2").ok()) << "gone already is fine";
  std::filesystem::remove_all(dir);
}

// Channels that are only directories, and count what was opened and closed.
class FakeChannels : public AttemptChannels {
 public:
  explicit FakeChannels(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<std::string> Open(const std::string& job_id, int64_t attempt) override {
    ++opened[job_id + "." + std::to_string(attempt)];
    return dir_ + "/" + job_id;
  }
  void Close(const std::string& job_id, int64_t attempt) override {
    ++closed[job_id + "." + std::to_string(attempt)];
  }
  int RemoveAllBut(const std::vector<std::string>&) override { return 0; }
  std::map<std::string, int> opened, closed;

 private:
  std::string dir_;
};

TEST(JobIsolationTest, AUidPerJobAndOneSetupPerAttemptGoneWithItsLastLearner) {
  char tmpl[] = "/tmp/weft-isolation-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  FakeChannels channels(dir);
  JobIsolation::Options o;
  o.netns_dir = dir + "/netns";
  o.shm_dir = dir + "/shm";
  o.first_uid = 2000000000;
  o.uid_count = 2;
  o.network_namespaces = geteuid() == 0;
  JobIsolation iso(o, channels);
  auto a0 = iso.Join("job-a", 1);
  auto a1 = iso.Join("job-a", 1);  // the gang's second learner
  ASSERT_TRUE(a0.ok() && a1.ok()) << a0.status() << a1.status();
  EXPECT_EQ(a0->uid, a1->uid);
  EXPECT_EQ(a0->shm_dir, a1->shm_dir);
  EXPECT_EQ(a0->network_namespace, a1->network_namespace);
  EXPECT_TRUE(std::filesystem::is_directory(a0->shm_dir));
  EXPECT_EQ(channels.opened["job-a.1"], 1);
  auto b = iso.Join("job-b", 3);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->uid, a0->uid) << "another job, another uid";
  EXPECT_NE(b->shm_dir, a0->shm_dir);
  // Both uids of the range are held: a third job waits for one.
  EXPECT_TRUE(absl::IsResourceExhausted(iso.Join("job-c", 1).status()));
  iso.Leave("job-a", 1);
  EXPECT_EQ(channels.closed["job-a.1"], 0) << "one learner of the attempt still runs";
  EXPECT_TRUE(std::filesystem::is_directory(a0->shm_dir));
  iso.Leave("job-a", 1);
  EXPECT_EQ(channels.closed["job-a.1"], 1);
  EXPECT_FALSE(std::filesystem::exists(a0->shm_dir));
  if (!a0->network_namespace.empty()) {
    EXPECT_FALSE(std::filesystem::exists(a0->network_namespace));
  }
  auto c = iso.Join("job-c", 1);
  ASSERT_TRUE(c.ok()) << "job-a's uid is free again: " << c.status();
  EXPECT_EQ(c->uid, a0->uid);
  iso.Leave("job-b", 3);
  iso.Leave("job-c", 1);
  // A learner an earlier weftd started keeps the uid it runs as, and no other job gets it.
  auto adopted = iso.Join("job-d", 7, uid_t{2000000001});
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(adopted->uid, 2000000001u);
  auto e = iso.Join("job-e", 1);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->uid, 2000000000u);
  iso.Leave("job-d", 7);
  iso.Leave("job-e", 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft
