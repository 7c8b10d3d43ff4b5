// GPUs handed to learners, end to end (a real weftd, real containers): with fake device nodes
// of the NVIDIA major that the test makes (mknod c 195 N; no driver, so an allowed open fails
// with ENXIO and a refused one with EPERM) and a CDI spec naming them, two command jobs of one
// GPU each on a node of two get different devices; each can open its own and not the other's
// (the container's devices cgroup); CUDA_VISIBLE_DEVICES and WEFT_GPUS say which; a third waits
// naming GPUs; a killed weftd's successor adopts the learners with their devices; and each job's
// GPU-seconds are counted.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// The tenant's program: says what it was given, waits for the test to put both fake devices
// in its WORK_DIR (and to say go), opens each, says how that went, and hands back a model.
constexpr char kProbe[] = R"(import errno, os, time
wd = os.environ["WORK_DIR"]
print("WEFT_GPUS=" + os.environ.get("WEFT_GPUS", ""), flush=True)
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", ""), flush=True)
print("in /dev: " + " ".join(sorted(d for d in os.listdir("/dev") if d.startswith("fakegpu"))),
      flush=True)
print("waiting for go", flush=True)
deadline = time.time() + 600
while not os.path.exists(os.path.join(wd, "go")) and time.time() < deadline:
    time.sleep(0.2)
for g in (0, 1):
    try:
        os.close(os.open(os.path.join(wd, "fakegpu%d" % g), os.O_RDWR))
        print("gpu %d: opened" % g, flush=True)
    except OSError as e:
        print("gpu %d: %s" % (g, errno.errorcode[e.errno]), flush=True)
open("model.txt", "w").write("a model")
with open(os.environ["WEFT_METRICS_FILE"], "a") as f:
    f.write('{"model": "model.txt", "test_accuracy": 0.5, "step": 1}\n')
)";

class GpuTest : public testing::WeftdTest {
 protected:
  // A vendor of its own per test process: the spec and its devices are this test's alone.
  static std::string Kind() { return "weft-test-" + std::to_string(::getpid()) + ".example/gpu"; }

  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("gpu");
    o.containers = true;
    o.nodes =
        "nodes:\n  - name: gpu-node\n    cpus: 4\n    memory_mb: 8192\n    gpus:\n"
        "      - {index: 0, cdi: " +
        Kind() +
        "=0, model: fake}\n"
        "      - {index: 1, cdi: " +
        Kind() + "=1, model: fake}\n";
    return o;
  }

  void SetUp() override {
    // The devices and their CDI spec first: weftd checks nothing of them, podman reads the spec
    // when a container asks for a device.
    char tmpl[] = "/tmp/weft-fakegpu-XXXXXX";
    dev_dir_ = mkdtemp(tmpl);
    ASSERT_EQ(::chmod(dev_dir_.c_str(), 0755), 0);
    std::string devices;
    for (int g : {0, 1}) {
      const std::string node = dev_dir_ + "/fakegpu" + std::to_string(g);
      ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, g)), 0) << node;
      ASSERT_EQ(::chmod(node.c_str(), 0666), 0);  // past the umask
      devices += "  - name: \"" + std::to_string(g) +
                 "\"\n    containerEdits:\n"
                 "      deviceNodes:\n        - {path: /dev/fakegpu" +
                 std::to_string(g) + ", hostPath: " + node +
                 ", type: c, major: 195, minor: " + std::to_string(g) + "}\n";
    }
    std::filesystem::create_directories("/var/run/cdi");
    spec_ = "/var/run/cdi/weft-test-" + std::to_string(::getpid()) + ".yaml";
    std::ofstream(spec_) << "cdiVersion: \"0.5.0\"\nkind: " << Kind() << "\ndevices:\n" << devices;
    testing::WeftdTest::SetUp();
  }
  void TearDown() override {
    testing::WeftdTest::TearDown();
    std::filesystem::remove(spec_);
    std::filesystem::remove_all(dev_dir_);
  }

  // Puts both fake devices in job `id`'s WORK_DIR (as root: a container cannot make a device
  // node) and tells its program to go on.
  void Go(const std::string& id) {
    const std::string wd = dir_ + "/data/jobs/" + id + "/work/rank-0";
    for (int g : {0, 1}) {
      const std::string node = wd + "/fakegpu" + std::to_string(g);
      ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, g)), 0) << node;
      ASSERT_EQ(::chmod(node.c_str(), 0666), 0);  // the job's uid opens it read-write
    }
    std::ofstream(wd + "/go") << "go";
  }

  std::string dev_dir_, spec_;
};

int GpuOf(const json& job) { return job["learners"][0]["gpus"][0].get<int>(); }

TEST_F(GpuTest, TwoJobsGetTheirOwnDeviceAndNoOtherAndKeepItAcrossAWeftdRestart) {
  const std::string code = Archive("probe", {Write("probe.py", kProbe)});
  ASSERT_EQ(weftd_->Cli({"artifact", "upload", code, "--name", "probe"}).exit_code, 0);
  const std::string body =
      "command: [python3, probe.py]\ncode: probe\nresources: {cpus: 1, memory_mb: 512, gpus: 1}\n";
  const std::string a = Submit("gpu-a", body), b = Submit("gpu-b", body);
  json ja = WaitFor(a, {"RUNNING"}, 120), jb = WaitFor(b, {"RUNNING"}, 120);
  ASSERT_EQ(ja.value("state", ""), "RUNNING") << ja.dump(2);
  ASSERT_EQ(jb.value("state", ""), "RUNNING") << jb.dump(2);
  const int ga = GpuOf(ja), gb = GpuOf(jb);
  EXPECT_NE(ga, gb);
  // A third waits, and says it is for a GPU.
  const std::string c = Submit("gpu-c", body);
  json jc = WaitUntil(
      c, [](const json& j) { return j.contains("waiting_reason"); }, 30, "waits");
  EXPECT_THAT(jc.value("waiting_reason", ""), HasSubstr("gpus")) << jc.dump(2);
  // Who holds which, as the API and the CLI show it.
  json nodes = Get("/v1/nodes");
  ASSERT_EQ(nodes["nodes"].size(), 1u);
  for (const json& g : nodes["nodes"][0]["gpus"]) {
    EXPECT_TRUE(g.value("held", false));
    EXPECT_EQ(g.value("job", ""), g.value("index", -1) == ga ? a : b);
  }
  testing::CommandResult shown = weftd_->Cli({"nodes"});
  std::cout << shown.output << weftd_->Cli({"show", a}).output;
  EXPECT_THAT(shown.output, HasSubstr(a + " (learner 0)"));

  // weftd dies; the next one adopts both learners, devices and all.
  weftd_->Kill();
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  json after = WaitFor(a, {"RUNNING"}, 60);
  EXPECT_EQ(after.value("attempt", 0), 1) << "adopted, not restarted";
  EXPECT_EQ(GpuOf(after), ga);
  EXPECT_EQ(GpuOf(WaitFor(b, {"RUNNING"}, 60)), gb);

  for (const std::string& id : {a, b}) {
    WaitForLog(id, 0, "waiting for go", 60);
    Go(id);
  }
  for (const auto& [id, mine] : {std::pair{a, ga}, std::pair{b, gb}}) {
    json done = WaitFor(id, {"COMPLETED", "FAILED"}, 120);
    EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
    const std::string log = Log(id, 0);
    const int other = 1 - mine;
    EXPECT_THAT(log, HasSubstr("WEFT_GPUS=" + std::to_string(mine))) << log;
    EXPECT_THAT(log, HasSubstr("CUDA_VISIBLE_DEVICES=0"))
        << log;  // its one device, as CUDA sees it
    EXPECT_THAT(log, HasSubstr("in /dev: fakegpu" + std::to_string(mine) + "\n")) << log;
    // Its own device opens (ENXIO: allowed, no driver); the other's is refused by the cgroup.
    EXPECT_THAT(log, HasSubstr("gpu " + std::to_string(mine) + ": ENXIO")) << log;
    EXPECT_THAT(log, HasSubstr("gpu " + std::to_string(other) + ": EPERM")) << log;
    EXPECT_GT(done.value("gpu_seconds", 0.0), 0.0) << done.dump(2);
  }
  // The third gets a device once one is free.
  json ran = WaitFor(c, {"RUNNING"}, 120);
  ASSERT_EQ(ran.value("state", ""), "RUNNING") << ran.dump(2);
  WaitForLog(c, 0, "waiting for go", 60);
  Go(c);
  EXPECT_EQ(WaitFor(c, {"COMPLETED", "FAILED"}, 120).value("state", ""), "COMPLETED");
  // The tenant's GPU time is its jobs'.
  json tenants = Get("/v1/tenants", weftd_->admin_token());
  double tenant_seconds = 0;
  for (const json& t : tenants["tenants"]) {
    if (t.value("name", "") == "default") tenant_seconds = t["usage"].value("gpu_seconds", 0.0);
  }
  EXPECT_GE(tenant_seconds, Get("/v1/jobs/" + a).value("gpu_seconds", 0.0) +
                                Get("/v1/jobs/" + b).value("gpu_seconds", 0.0));
}

}  // namespace
}  // namespace weft
