// The web dashboard in a real headless browser: a real weftd serves /ui/ and trains a real job,
// and tests/ui/dashboard.mjs drives Debian's chromium through playwright-core (sign-in with a
// wrong and a right token, the accuracy curve growing live, halt, the queue, nodes and shares
// pages, no CSP violations). Screenshots go to build/test-artifacts/dashboard/.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;

// Long enough that it is still training while the browser watches (30 epochs of the MLP take
// minutes); the test halts it. Evaluated often so the accuracy curve visibly grows.
constexpr char kManifest[] = R"(name: dashboard-mlp
model: {architecture: mlp, hidden_units: [128]}
data: {train_samples: 60000, test_samples: 1000}
training: {epochs: 30, batch_size: 64, optimizer: adam, eval_every_steps: 40, threads: 1}
resources: {cpus: 1, memory_mb: 1024}
targets: {deliver: 0.70, complete: 0.99}
)";

// The first of `names` found on PATH (or as an absolute path), or "".
std::string FindProgram(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (name.front() == '/' && access(name.c_str(), X_OK) == 0) return name;
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      const std::string candidate = dirs.substr(start, end - start) + "/" + name;
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      start = end + 1;
    }
  }
  return "";
}

// weftd starts only when there is a browser to drive.
class DashboardTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("dashboard");
    o.start = false;
    return o;
  }
  void SetUp() override {
    node_ = FindProgram({"node", "nodejs"});
    chromium_ = FindProgram({"chromium", "chromium-browser", "google-chrome"});
    if (node_.empty() || chromium_.empty() ||
        !std::filesystem::exists(std::string(WEFT_SOURCE_DIR) +
                                 "/ui/node_modules/playwright-core")) {
      GTEST_SKIP() << "no browser to drive: needs node, chromium and playwright-core in "
                      "ui/node_modules (scripts/install-deps.sh installs all three)";
    }
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartWeftd();
  }

  std::string node_, chromium_;
};

TEST_F(DashboardTest, SignInWatchAJobTrainAndHaltItInARealBrowser) {
  const std::string source = WEFT_SOURCE_DIR;
  auto submitted = weftd_->Client().Post("/v1/jobs", kManifest, "application/yaml");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  const std::string id = json::parse(submitted->body).value("id", "");
  // Running before the browser opens it.
  const json running = WaitFor(id, {"RUNNING", "DELIVERED"}, 30);
  ASSERT_TRUE(running.is_object());
  ASSERT_THAT(running.value("state", ""), ::testing::AnyOf("RUNNING", "DELIVERED"));

  // A small search for the experiment page.
  auto experiment =
      weftd_->Client().Post("/v1/experiments", testing::kSmallExperiment, "application/yaml");
  ASSERT_TRUE(experiment);
  ASSERT_EQ(experiment->status, 201) << experiment->body;
  const std::string experiment_id = json::parse(experiment->body).value("id", "");

  const std::string artifacts = std::string(WEFT_BIN_DIR) + "/../test-artifacts/dashboard";
  auto run = testing::RunCommand(
      {node_, source + "/tests/ui/dashboard.mjs"},
      {"WEFT_URL=" + weftd_->url(), "WEFT_TOKEN=" + weftd_->token(), "WEFT_JOB=" + id,
       "WEFT_EXPERIMENT=" + experiment_id, "WEFT_ADMIN_TOKEN=" + weftd_->admin_token(),
       "WEFT_ARTIFACTS=" + artifacts, "CHROMIUM=" + chromium_},
      300);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  // What the browser did is what weftd now holds.
  const json after = Get("/v1/jobs/" + id);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(after.value("state", ""), "HALTED") << after.dump(2);
  EXPECT_TRUE(std::filesystem::exists(artifacts + "/job.png"));
}

}  // namespace
}  // namespace weft
