// The GPUs of weftd's nodes (daemon/gpu_inventory.h): the nodes file's count or device list, and
// the devices the CDI specs in a directory name.
#include "daemon/gpu_inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace weft::daemon {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::vector<scheduler::GpuDevice>> Read(const std::string& yaml) {
  return ReadGpus(YAML::Load(yaml)["gpus"], "nodes[0]");
}

TEST(GpuInventoryTest, ACountOrAListOfDevices) {
  auto counted = Read("gpus: 2");
  ASSERT_TRUE(counted.ok());
  ASSERT_EQ(counted->size(), 2u);
  EXPECT_EQ((*counted)[1].index, 1);
  EXPECT_EQ((*counted)[1].cdi, "");
  auto listed = Read(
      "gpus: [{index: 3, cdi: nvidia.com/gpu=3, model: A100}, {index: 0, cdi: nvidia.com/gpu=0}]");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].index, 0);  // by index
  EXPECT_EQ((*listed)[1].cdi, "nvidia.com/gpu=3");
  EXPECT_EQ((*listed)[1].model, "A100");
  EXPECT_TRUE(Read("name: n").ok() && Read("name: n")->empty());
}

TEST(GpuInventoryTest, AMistakeIsNamedByItsEntryAndField) {
  struct Case {
    std::string yaml, field, problem;
  };
  for (const Case& c : std::vector<Case>{
           {"gpus: -1", "nodes[0].gpus", "a count"},
           {"gpus: {index: 0}", "nodes[0].gpus", "list"},
           {"gpus: [{cdi: nvidia.com/gpu=0}]", "nodes[0].gpus[0].index", "required"},
           {"gpus: [{index: 0}, {index: 0}]", "nodes[0].gpus[1].index", "listed twice"},
           {"gpus: [{index: 0, cdi: 'nvidia.com/gpu=0; rm -rf /'}]", "nodes[0].gpus[0].cdi",
            "vendor/class=name"},
           {"gpus: [{index: 0, uuid: x}]", "nodes[0].gpus[0].uuid", "unknown"},
       }) {
    auto got = Read(c.yaml);
    ASSERT_FALSE(got.ok()) << c.yaml;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.field)) << c.yaml;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.problem)) << c.yaml;
  }
}

TEST(GpuInventoryTest, CdiSpecsNameTheGpusOfEveryVendorByIndex) {
  char tmpl[] = "/tmp/weft-cdi-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/nvidia.yaml") << R"(cdiVersion: "0.5.0"
kind: nvidia.com/gpu
devices:
  - name: "1"
    containerEdits: {deviceNodes: [{path: /dev/nvidia1}]}
  - name: "0"
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
  - name: all
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]}
  - name: GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c
    containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}
)";
  std::ofstream(dir + "/other.json")
      << R"({"cdiVersion": "0.5.0", "kind": "vendor.example/gpu", "devices": [{"name": "gpu2"},
            {"name": "gpu1"}]})";
  std::ofstream(dir + "/nic.yaml") << "cdiVersion: \"0.5.0\"\nkind: vendor.example/nic\n"
                                      "devices: [{name: \"4\"}]\n";
  std::ofstream(dir + "/broken.yaml") << "kind: [unclosed\n";
  std::vector<std::string> warnings;
  auto gpus = DiscoverCdiGpus({dir, dir + "/missing"}, &warnings);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].cdi, "nvidia.com/gpu=0");
  EXPECT_EQ(gpus[1].cdi, "nvidia.com/gpu=1");  // the first spec (by name) wins index 1
  EXPECT_EQ(gpus[2].cdi, "vendor.example/gpu=gpu2");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("broken.yaml"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace weft::daemon
