// What a command job's program writes to $WEFT_METRICS_FILE is tenant input: each line is
// parsed strictly, and a path it names can only be a file inside WORK_DIR.
#include "train/command_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace weft::train {
namespace {

using ::testing::HasSubstr;
constexpr char kWork[] = "/data/jobs/job-1/work/rank-0";

TEST(CommandEventsTest, MetricsCheckpointsAndModelsParse) {
  auto m = ParseCommandEvent(
      R"({"step": 120, "epoch": 1, "train_loss": 0.41, "test_accuracy": 0.86, "samples": 7680,)"
      R"( "samples_per_s": 900.5, "epochs_total": 3, "steps_total": 300})",
      kWork);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kind, CommandEvent::Kind::kMetrics);
  EXPECT_EQ(m->step, 120);
  EXPECT_EQ(m->epoch, 1);
  EXPECT_DOUBLE_EQ(*m->train_loss, 0.41);
  EXPECT_DOUBLE_EQ(*m->test_accuracy, 0.86);
  EXPECT_EQ(*m->samples, 7680);
  EXPECT_EQ(*m->epochs_total, 3);
  EXPECT_EQ(*m->steps_total, 300);

  auto c = ParseCommandEvent(R"({"checkpoint": "ckpt/step-40.pt", "step": 40, "epoch": 0})", kWork);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kind, CommandEvent::Kind::kCheckpoint);
  EXPECT_EQ(c->path, "ckpt/step-40.pt");

  auto a = ParseCommandEvent(
      std::string(R"({"model": ")") + kWork + R"(/model.pt", "step": 50, "test_accuracy": 0.8})",
      kWork);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->kind, CommandEvent::Kind::kModel);
  EXPECT_EQ(a->path, "model.pt") << "an absolute path inside WORK_DIR comes back relative";
}

TEST(CommandEventsTest, BadLinesNameTheFieldAndTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"epoch": 1})", "step: is required"},
      {R"({"step": -1})", "step: must be an integer in [0, "},
      {R"({"step": 1.5})", "step: must be an integer"},
      {R"({"step": 1, "test_accuracy": 3})", "test_accuracy: must be a number in [0, 1], got 3"},
      {R"({"step": 1, "train_loss": "low"})", "train_loss: must be a number"},
      {R"({"step": 1, "lr": 0.1})", "lr: is not a field weft knows"},
      {R"({"step": 1, "model": "m.pt"})", "test_accuracy: is required with model"},
      {R"({"step": 1, "model": "m.pt", "checkpoint": "c.pt", "test_accuracy": 1})", "not both"},
      {R"({"step": 1, "checkpoint": 7})", "checkpoint: must be the path"},
      {R"([1, 2])", "is not a JSON object"},
      {R"({"step": 1)", "is not a JSON object"},
      {"", "is not a JSON object"},
  };
  for (const auto& [line, problem] : cases) {
    auto e = ParseCommandEvent(line, kWork);
    ASSERT_FALSE(e.ok()) << line;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(problem)) << line;
  }
  auto big = ParseCommandEvent(std::string(kMaxCommandEventBytes + 1, ' '), kWork);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("at most"));
}

TEST(CommandEventsTest, APathCanOnlyNameAFileInsideWorkDir) {
  for (const char* bad : {"../escape.pt", "a/../../b", "/etc/shadow", "/data/jobs/job-1/work/x",
                          "/data/jobs/job-1/work/rank-0", "a//b", "./x", "", "a/\x01"}) {
    auto p = PathInsideWorkDir(bad, kWork);
    EXPECT_FALSE(p.ok()) << bad << " -> " << (p.ok() ? *p : "");
  }
  EXPECT_FALSE(PathInsideWorkDir(std::string(5000, 'a'), kWork).ok());
  EXPECT_EQ(*PathInsideWorkDir("sub/dir/m.pt", kWork), "sub/dir/m.pt");
  EXPECT_EQ(*PathInsideWorkDir(std::string(kWork) + "/m.pt", kWork), "m.pt");
}

}  // namespace
}  // namespace weft::train
