// Experiments through a real weftd, the weft CLI and real learners training on Fashion-MNIST:
//   - an ASHA search survives a kill -9 of weftd in the middle: the restarted weftd goes on
//     from the stored search and completes it, every trial a job of the tenant with its values,
//     `weft experiment follow` shows it to its end across the restart, and the best trial's
//     model downloads;
//   - halt stops the trials, resume goes on, delete removes the experiment and its trials' jobs;
//   - a bad manifest is refused naming the field, and another tenant sees nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using testing::kSmallExperiment;

class ExperimentTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("experiment");
    o.fashion_mnist = true;
    return o;
  }

  // `weft experiment submit` of `manifest`: the experiment's id.
  std::string SubmitExperiment(const std::string& manifest) {
    auto r = weftd_->Cli({"experiment", "submit", Write("experiment.yaml", manifest)});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string marker = "experiment ";
    const size_t at = r.output.find(marker);
    if (at == std::string::npos) return "";
    return r.output.substr(at + marker.size(),
                           r.output.find(' ', at + marker.size()) - at - marker.size());
  }

  // Polls GET /v1/experiments/ID every 200 ms until `done` holds; a test failure naming `what`
  // after `timeout_s`. The last answer.
  json WaitForExperiment(const std::string& id, const std::function<bool(const json&)>& done,
                         int timeout_s, const std::string& what) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    json e;
    while (std::chrono::steady_clock::now() < end) {
      e = Get("/v1/experiments/" + id);
      if (e.is_object() && e.contains("state") && done(e)) return e;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "experiment " << id << ": " << what << " never happened: " << e.dump(2)
                  << weftd_->log();
    return e;
  }

  static bool SomeTrialRuns(const json& e) {
    for (const json& t : e["trials"]) {
      if (t.value("state", "") == "RUNNING") return true;
    }
    return false;
  }
};

TEST_F(ExperimentTest, AnAshaSearchSurvivesAKillOfWeftdAndItsBestModelDownloads) {
  const std::string id = SubmitExperiment(kSmallExperiment);
  ASSERT_THAT(id, ::testing::StartsWith("exp-"));
  // `weft experiment follow` reads the event stream from the start and through the restart
  // (it reconnects), and ends with the search.
  const std::vector<std::string> follow = {std::string(WEFT_BIN_DIR) + "/weft",
                                           "--server",
                                           weftd_->url(),
                                           "--token",
                                           weftd_->token(),
                                           "experiment",
                                           "follow",
                                           id};
  std::future<testing::CommandResult> followed =
      std::async(std::launch::async, [&follow] { return testing::RunCommand(follow, {}, 300); });
  WaitForExperiment(id, SomeTrialRuns, 120, "a trial RUNNING");
  weftd_->Kill();
  weftd_->set_port(weftd_->port());  // where the follow reconnects
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  const json e = WaitForExperiment(
      id, [](const json& x) { return x["state"] != "RUNNING"; }, 300, "the end of the search");
  ASSERT_EQ(e["state"], "COMPLETED") << e.dump(2);
  const testing::CommandResult f = followed.get();
  EXPECT_EQ(f.exit_code, 0) << f.output;
  EXPECT_THAT(f.output, HasSubstr("RUNNING  trials")) << "no progress line before the end";
  EXPECT_THAT(f.output, HasSubstr("COMPLETED: the search is done: 4 trials")) << f.output;
  EXPECT_THAT(e.value("reason", ""), HasSubstr("the search is done: 4 trials"));
  ASSERT_EQ(e["trials"].size(), 4u);
  ASSERT_EQ(e["rungs"].size(), 2u);
  EXPECT_EQ(e["rungs"][0]["results"], 4);
  EXPECT_GE(e["rungs"][1]["results"].get<int>(), 2) << "the top half of rung 0, at least";
  for (const json& t : e["trials"]) {
    ASSERT_TRUE(t["job"].is_string()) << t.dump();
    EXPECT_TRUE(t["values"].contains("training.learning_rate")) << t.dump();
    const json job = Get("/v1/jobs/" + t.value("job", ""));
    EXPECT_EQ(job["tenant"], "default");
    EXPECT_EQ(job["name"], "small-search-t" + std::to_string(t.value("trial", -1)));
    // Rung 1's trials were promoted: they trained 2 epochs, resumed after the first.
    if (t["rung"] == 1) {
      EXPECT_EQ(job["progress"]["epoch"], 2) << job.dump(2);
    }
  }
  ASSERT_TRUE(e["best_job"].is_string());
  EXPECT_GT(e["best_metric"].get<double>(), 0.5);

  auto show = weftd_->Cli({"experiment", "show", id});
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_THAT(show.output, HasSubstr("training.learning_rate="));
  EXPECT_THAT(weftd_->Cli({"experiment", "list"}).output, HasSubstr(id));
  const std::string model = dir_ + "/best.pt";
  auto best = weftd_->Cli({"experiment", "best", id, "--download", "-o", model});
  EXPECT_EQ(best.exit_code, 0) << best.output;
  EXPECT_THAT(best.output, HasSubstr(e.value("best_job", "")));
  EXPECT_GT(std::filesystem::file_size(model), 1000u);
}

TEST_F(ExperimentTest, HaltStopsTheTrialsResumeGoesOnAndDeleteRemovesThem) {
  // Trials long enough to halt: 30 epochs of 12,000 images in rung 0.
  std::string slow = kSmallExperiment;
  slow.replace(slow.find("train_samples: 2000"), 19, "train_samples: 12000");
  slow.replace(slow.find("epochs: 2"), 9, "epochs: 60");
  slow.replace(slow.find("eta: 2"), 6, "eta: 2\n  min_resource: 30");
  const std::string id = SubmitExperiment(slow);
  ASSERT_THAT(id, ::testing::StartsWith("exp-"));
  json e = WaitForExperiment(id, SomeTrialRuns, 120, "a trial RUNNING");
  auto halt = weftd_->Cli({"experiment", "halt", id});
  EXPECT_EQ(halt.exit_code, 0) << halt.output;
  e = Get("/v1/experiments/" + id);
  EXPECT_EQ(e["state"], "HALTED");
  std::vector<std::string> jobs;
  for (const json& t : e["trials"]) {
    jobs.push_back(t.value("job", ""));
    EXPECT_EQ(t["state"], "HALTED") << t.dump();
  }
  auto resume = weftd_->Cli({"experiment", "resume", id});
  EXPECT_EQ(resume.exit_code, 0) << resume.output;
  WaitForExperiment(id, SomeTrialRuns, 120, "a trial RUNNING again");
  auto del = weftd_->Cli({"experiment", "delete", id});
  EXPECT_EQ(del.exit_code, 0) << del.output;
  int status = 0;
  Get("/v1/experiments/" + id, "", &status);
  EXPECT_EQ(status, 404);
  for (const std::string& job : jobs) {
    Get("/v1/jobs/" + job, "", &status);
    EXPECT_EQ(status, 404) << job;
  }
}

TEST_F(ExperimentTest, ABadManifestNamesTheFieldAndAnotherTenantSeesNothing) {
  std::string bad = kSmallExperiment;
  bad.replace(bad.find("eta: 2"), 6, "eta: 1");
  auto r = weftd_->Cli({"experiment", "submit", Write("bad.yaml", bad)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("search.eta"));
  EXPECT_THAT(Get("/v1/experiments")["experiments"], ::testing::IsEmpty());

  const std::string id = SubmitExperiment(kSmallExperiment);
  const std::string other = NewTenant("other");
  int status = 0;
  Get("/v1/experiments/" + id, other, &status);
  EXPECT_EQ(status, 404);
  EXPECT_THAT(Get("/v1/experiments", other)["experiments"], ::testing::IsEmpty());
  auto halt = weftd_->CliAs(other, {"experiment", "halt", id});
  EXPECT_EQ(halt.exit_code, 1);
  EXPECT_THAT(halt.output, HasSubstr("no experiment"));
}

}  // namespace
}  // namespace weft
