// GPUs on Slurm (weftd --executor slurm --runtime none): weft asks Slurm for a learner's GPUs
// (--gres=gpu:N), Slurm chooses them, and the learner's registration records Slurm's choice in
// weft's view. A throwaway Slurm cluster of one node whose gres holds two fake device nodes
// (executor/slurm_cluster.h); one of them is taken by a Slurm job from outside weft, so Slurm
// gives weft's learner the other one whatever weft's scheduler had picked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class SlurmGpuTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("slurm-gpu");
    o.slurm_nodes = 1;
    o.slurm_cpus_per_node = 2;
    o.slurm_gpus_per_node = 2;
    // On Slurm a learner's devices are Slurm's to confine (cgroup.conf ConstrainDevices).
    o.args = {"--runtime", "none", "--allow-unsandboxed-commands"};
    return o;
  }
};

TEST_F(SlurmGpuTest, SlurmChoosesALearnersGpuAndWeftRecordsIt) {
  // Outside weft, a Slurm job holds one of the node's two GPUs.
  auto outside = slurm_->Command({"sbatch", "--parsable", "--gres=gpu:1", "--job-name=outside",
                                  "--output=/dev/null", "--wrap", "sleep 300"});
  ASSERT_EQ(outside.exit_code, 0) << outside.text;
  const std::string job = outside.text.substr(0, outside.text.find_first_of(";\n"));
  std::string held, shown_text;
  for (int i = 0; i < 100 && held.empty(); ++i) {
    auto shown = slurm_->Command({"scontrol", "show", "job", "-d", job});
    shown_text = shown.text;
    const size_t at = shown.text.find("(IDX:");  // GRES=gpu:1(IDX:0)
    if (at != std::string::npos) held = shown.text.substr(at + 5, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(held.empty()) << "the outside job holds no GPU: " << shown_text;
  const int free_gpu = held == "0" ? 1 : 0;

  const std::string program =
      Write("probe.py",
            "import os, time\nprint('WEFT_GPUS=' + os.environ.get('WEFT_GPUS', ''), flush=True)\n"
            "time.sleep(5)\n"
            "open('model.txt', 'w').write('m')\n"
            "open(os.environ['WEFT_METRICS_FILE'], 'a').write("
            "'{\"model\": \"model.txt\", \"test_accuracy\": 0.5, \"step\": 1}\\n')\n");
  ASSERT_EQ(
      weftd_->Cli({"artifact", "upload", Archive("probe", {program}), "--name", "probe"}).exit_code,
      0);
  const std::string id =
      Submit("gpu",
             "command: [python3, probe.py]\ncode: probe\nresources: {cpus: 1, memory_mb: 512, "
             "gpus: 1}\n");
  // Registered: the learner's record holds the device Slurm gave it.
  json running = WaitFor(id, {"RUNNING"}, 120);
  ASSERT_EQ(running.value("state", ""), "RUNNING") << running.dump(2);
  EXPECT_EQ(running["learners"][0]["gpus"], json::array({free_gpu})) << running.dump(2);
  json done = WaitFor(id, {"COMPLETED", "FAILED"}, 120);
  EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
  // The program was told the same device.
  EXPECT_THAT(Log(id, 0), HasSubstr("WEFT_GPUS=" + std::to_string(free_gpu)));
  EXPECT_GT(done.value("gpu_seconds", 0.0), 0.0);
  slurm_->Command({"scancel", job});
}

}  // namespace
}  // namespace weft
