// A tenant's disk quota through a real weftd and a real learner: the job whose checkpoints take
// the tenant past its quota is halted with the reason, the tenant's submissions, uploads and
// resumes get 507 saying why, and once the admin raises the quota the job resumes from its
// checkpoint and completes.
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>
#include <vector>

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
    o.args = {"--disk-check-seconds", "0.2", "--upload-timeout-seconds", "3"};
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

// Uploads with no length (chunked) are held to the quota as they stream; a tenant has at most two
// in progress at once; a body that does not arrive within the deadline is cut off.
TEST_F(DiskQuotaServiceTest, UploadsAreHeldToTheQuotaAsTheyStreamToTwoAtOnceAndToADeadline) {
  // The trickling upload below is cut off mid-body: its next write must fail, not kill the test.
  std::signal(SIGPIPE, SIG_IGN);
  ASSERT_EQ(PatchDefault(R"({"disk_quota_mb": 2})").first, 200);
  // 8 MiB in 64 KiB chunks, no Content-Length: the old pre-check counted it as 0 bytes.
  auto chunked = weftd_->Client().Post(
      "/v1/artifacts?name=big",
      [sent = 0](size_t, httplib::DataSink& sink) mutable {
        const std::string piece(64 << 10, 'x');
        sink.write(piece.data(), piece.size());
        if (++sent == 128) sink.done();
        return true;
      },
      "application/octet-stream");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 507) << chunked->body;
  EXPECT_THAT(chunked->body, HasSubstr("the upload was stopped at"));
  auto listed = weftd_->Client().Get("/v1/artifacts");
  ASSERT_TRUE(listed);
  EXPECT_EQ(json::parse(listed->body)["artifacts"].size(), 0u) << listed->body;

  // Two uploads held open: a third is refused while they last.
  std::atomic<bool> release{false};
  auto slow = [&](const std::string& name) {
    return weftd_->Client().Post(
        "/v1/artifacts?name=" + name,
        [&, sent = false](size_t, httplib::DataSink& sink) mutable {
          if (!sent) sink.write("abc", 3);
          sent = true;
          if (release) {
            sink.done();
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
          return true;
        },
        "application/octet-stream");
  };
  std::vector<int> statuses(2, 0);
  std::vector<std::thread> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([&, i] {
      auto r = slow("held-" + std::to_string(i));
      statuses[i] = r ? r->status : -1;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  auto third = weftd_->Client().Post("/v1/artifacts?name=third", "abc", "application/octet-stream");
  release = true;
  for (std::thread& t : held) t.join();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 429) << third->body;
  EXPECT_THAT(statuses, ::testing::ElementsAre(201, 201));

  // A body trickling in past the 3 s deadline is cut off; nothing of it is kept.
  auto trickle = weftd_->Client().Post(
      "/v1/artifacts?name=trickle",
      [start = std::chrono::steady_clock::now()](size_t, httplib::DataSink& sink) {
        sink.write("x", 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(6)) sink.done();
        return true;
      },
      "application/octet-stream");
  if (trickle) {  // else the connection was cut before the answer was read
    EXPECT_EQ(trickle->status, 408) << trickle->body;
  }
  bool logged = false;
  for (int i = 0; i < 100 && !logged; ++i) {
    logged =
        weftd_->log().find("upload of 'trickle' stopped: its body did not arrive within 3 s") !=
        std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(logged) << weftd_->log();
  listed = weftd_->Client().Get("/v1/artifacts");
  ASSERT_TRUE(listed);
  EXPECT_EQ(json::parse(listed->body)["artifacts"].size(), 2u) << listed->body;
}

}  // namespace
}  // namespace weft
