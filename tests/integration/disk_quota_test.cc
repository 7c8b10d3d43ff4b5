// A tenant's disk quota through a real weftd and a real learner: the job whose checkpoints take
// the tenant past its quota is halted with the reason, the tenant's submissions, uploads and
// resumes get 507 saying why, and once the admin raises the quota the job resumes from its
// checkpoint and completes.
#include <chrono>
#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class DiskQuotaServiceTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("disk-quota");
    o.args = {"--disk-check-seconds", "0.2"};
    return o;
  }
  // The admin's PATCH of tenant `default`: status and answer.
  std::pair<int, json> PatchDefault(const std::string& body) {
    auto r = weftd_->ClientAs(weftd_->admin_token())
                 .Patch("/v1/tenants/default", body, "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
};

TEST_F(DiskQuotaServiceTest, AJobPastItsTenantsQuotaIsHaltedAndGoesOnOnceThereIsRoom) {
  auto [status, answer] = PatchDefault(R"({"disk_quota_mb": 0})");
  EXPECT_EQ(status, 400) << answer.dump(2);
  EXPECT_EQ(answer["error"]["details"][0].value("field", ""), "disk_quota_mb");
  std::tie(status, answer) = PatchDefault(R"({"disk_quota_mb": 2})");
  ASSERT_EQ(status, 200) << answer.dump(2);
  EXPECT_EQ(answer["disk_quota_mb"], 2);

  // Checkpoints of this MLP take about 0.4 MiB each or more; ten are kept. Long enough to be
  // running when weftd looks (every 0.2 s).
  const std::string manifest =
      "name: fills\nmodel: {architecture: mlp, hidden_units: [128]}\n"
      "data: {train_samples: 12000, test_samples: 500}\ntraining: {epochs: 10, threads: 1}\n"
      "checkpoint: {every_steps: 10, keep: 10}\n";
  auto submitted = weftd_->Client().Post("/v1/jobs", manifest, "application/yaml");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  const std::string id = json::parse(submitted->body).value("id", "");
  json halted = WaitFor(id, {"HALTED"}, 120);
  EXPECT_THAT(halted.value("reason", ""), HasSubstr("of its 2.0 MiB disk quota"));

  // The tenant is told why at every door; the admin sees the figures.
  auto again = weftd_->Client().Post("/v1/jobs", manifest, "application/yaml");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 507) << again->body;
  EXPECT_EQ(json::parse(again->body)["error"].value("code", ""), "insufficient_storage");
  EXPECT_THAT(again->body, HasSubstr("tenant 'default' uses"));
  auto upload =
      weftd_->Client().Post("/v1/artifacts?name=small", "data", "application/octet-stream");
  ASSERT_TRUE(upload);
  EXPECT_EQ(upload->status, 507) << upload->body;
  auto resume = weftd_->Client().Post("/v1/jobs/" + id + "/resume", "", "application/json");
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->status, 507) << resume->body;
  auto tenant = weftd_->ClientAs(weftd_->admin_token()).Get("/v1/tenants/default");
  ASSERT_TRUE(tenant);
  json disk = json::parse(tenant->body)["disk"];
  EXPECT_GE(disk.value("used_bytes", int64_t{0}), int64_t{2} << 20) << disk.dump();
  EXPECT_EQ(disk.value("quota_bytes", int64_t{0}), int64_t{2} << 20) << disk.dump();
  EXPECT_GT(disk.value("used_inodes", int64_t{0}), 5) << "the job's directories and files";
  EXPECT_EQ(disk["unmeasured"], json::array()) << disk.dump();

  // Back to weftd's default quota: the job resumes from its checkpoint and completes.
  std::tie(status, answer) = PatchDefault(R"({"disk_quota_mb": null})");
  ASSERT_EQ(status, 200) << answer.dump(2);
  EXPECT_TRUE(answer["disk_quota_mb"].is_null());
  resume = weftd_->Client().Post("/v1/jobs/" + id + "/resume", "", "application/json");
  ASSERT_TRUE(resume);
  ASSERT_EQ(resume->status, 200) << resume->body;
  json done = WaitFor(id, {"COMPLETED"}, 180);
  EXPECT_TRUE(done["models"].contains("final")) << done.dump(2);
  auto log = weftd_->Client().Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(log);
  EXPECT_THAT(log->body, HasSubstr("resumed from"));
}

}  // namespace
}  // namespace weft
