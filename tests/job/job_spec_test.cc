#include "job/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/text.h"

namespace weft {
namespace {

constexpr char kGood[] = R"(
name: cnn-run
model: {architecture: cnn}
training: {epochs: 3}
)";

struct BadCase {
  std::string label;
  std::string manifest;
  std::string field;             // the field path the error must name
  std::string problem_contains;  // and part of its problem text
};

// Every case is kGood with one thing broken.
std::vector<BadCase> BadCases() {
  return {
      {"yaml syntax", "name: [unclosed\n", "(document)", "not valid YAML"},
      {"not a mapping", "- a\n- b\n", "(document)", "must be a mapping"},
      {"missing name", "model: {architecture: cnn}\ntraining: {epochs: 1}\n", "name", "required"},
      {"bad name", "name: Bad_Name\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\n", "name",
       "lower-case"},
      {"unknown top field", std::string(kGood) + "learner: 3\n", "learner", "unknown field"},
      {"missing model", "name: x\ntraining: {epochs: 1}\n", "model", "required"},
      {"unknown architecture", "name: x\nmodel: {architecture: resnet}\ntraining: {epochs: 1}\n",
       "model.architecture", "one of cnn, mlp"},
      {"hidden units on cnn",
       "name: x\nmodel: {architecture: cnn, hidden_units: [3]}\ntraining: {epochs: 1}\n",
       "model.hidden_units", "only to architecture mlp"},
      {"negative hidden unit",
       "name: x\nmodel: {architecture: mlp, hidden_units: [64, -1]}\ntraining: {epochs: 1}\n",
       "model.hidden_units[1]", "positive integer"},
      {"missing training", "name: x\nmodel: {architecture: cnn}\n", "training", "required"},
      {"missing epochs", "name: x\nmodel: {architecture: cnn}\ntraining: {batch_size: 3}\n",
       "training.epochs", "required"},
      {"zero epochs", "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 0}\n",
       "training.epochs", "positive integer"},
      {"negative batch",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, batch_size: -3}\n",
       "training.batch_size", "must be a positive integer, got '-3'"},
      {"text batch",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, batch_size: big}\n",
       "training.batch_size", "positive integer"},
      {"unknown optimizer",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, optimizer: lion}\n",
       "training.optimizer", "adam, sgd"},
      {"zero learning rate",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, learning_rate: 0}\n",
       "training.learning_rate", "(0, 10]"},
      {"momentum with adam",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, momentum: 0.5}\n",
       "training.momentum", "only to optimizer sgd"},
      {"momentum one",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, optimizer: sgd, momentum: 1}\n",
       "training.momentum", "[0, 1)"},
      {"typo in training", "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, epoch: 2}\n",
       "training.epoch", "unknown field"},
      {"relative data path", std::string(kGood) + "data: {path: data/fmnist}\n", "data.path",
       "absolute"},
      {"dataset with a slash", std::string(kGood) + "data: {dataset: ../etc}\n", "data.dataset",
       "must not start with '.' or '-'"},
      {"dataset and artifact", std::string(kGood) + "data: {dataset: a, artifact: b}\n",
       "data.artifact", "give data.dataset or data.artifact, not both"},
      {"data artifact as a path", std::string(kGood) + "data: {artifact: /etc/passwd}\n",
       "data.artifact", "names an artifact (weft artifact upload): has '/' at byte 0"},
      {"negative subset", std::string(kGood) + "data: {train_samples: -5}\n", "data.train_samples",
       "non-negative"},
      {"zero cpus", std::string(kGood) + "resources: {cpus: 0}\n", "resources.cpus", "(0, 1024]"},
      {"tiny memory", std::string(kGood) + "resources: {memory_mb: 10}\n", "resources.memory_mb",
       "at least 64"},
      {"zero learners", std::string(kGood) + "resources: {learners: 0}\n", "resources.learners",
       "positive integer"},
      {"unknown lr scaling",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, lr_scaling: cubic}\n",
       "training.lr_scaling", "linear"},
      {"unknown sync", "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: gossip}\n",
       "training.sync", "allreduce, ps"},
      {"ps without sync ps",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, ps: {consistency: bsp}}\n",
       "training.ps", "only to training.sync: ps"},
      {"unknown consistency",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps, ps: {consistency: "
       "eventual}}\n",
       "training.ps.consistency", "asp, bsp, ssp"},
      {"staleness without ssp",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps, ps: {staleness: "
       "2}}\n",
       "training.ps.staleness", "only to consistency: ssp"},
      {"too many servers",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps, ps: {servers: 65}}\n",
       "training.ps.servers", "[1, 64]"},
      {"elastic ps",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps}\nresources: "
       "{learners: {min: 1, max: 2}}\n",
       "resources.learners", "fixed number of learners"},
      {"spread ps",
       "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps}\nresources: "
       "{learners: 2, placement: spread}\n",
       "resources.placement", "one node"},
      {"target above one", std::string(kGood) + "targets: {deliver: 1.5}\n", "targets.deliver",
       "(0, 1]"},
      {"deliver above complete", std::string(kGood) + "targets: {deliver: 0.9, complete: 0.8}\n",
       "targets.deliver", "must not exceed targets.complete"},
      {"unknown metric", std::string(kGood) + "targets: {metric: f1, deliver: 0.5}\n",
       "targets.metric", "test_accuracy"},
      {"bad api version", std::string(kGood) + "apiVersion: weft/v9\n", "apiVersion", "weft/v1"},
      {"torchscript with another architecture",
       "name: x\nmodel: {architecture: cnn, torchscript: net.pt}\ntraining: {epochs: 1}\n",
       "model.architecture", "must be torchscript"},
      {"torchscript with hidden units",
       "name: x\nmodel: {torchscript: net.pt, hidden_units: [8]}\ntraining: {epochs: 1}\n",
       "model.hidden_units", "only to architecture mlp"},
      {"torchscript artifact as a path",
       "name: x\nmodel: {torchscript: ../../admin.token}\ntraining: {epochs: 1}\n",
       "model.torchscript", "must not start with '.'"},
      {"torchscript artifact with a slash",
       "name: x\nmodel: {torchscript: a/b.pt}\ntraining: {epochs: 1}\n", "model.torchscript",
       "has '/' at byte 1"},
      // Untrusted text: invalid UTF-8 and control characters are refused by field and place.
      {"raw invalid utf-8 name",
       "name: ab\xff\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\n", "name",
       "invalid UTF-8 at byte 2"},
      {"nul in data path", std::string(kGood) + "data: {path: \"/data\\0/../etc\"}\n", "data.path",
       "control character (0x00) at byte 5"},
      {"ansi escape in description", std::string(kGood) + "description: \"red \\e[31m\"\n",
       "description", "control character (0x1b) at byte 4"},
      {"huge description", std::string(kGood) + "description: " + std::string(5000, 'x') + "\n",
       "description", "at most 4096 bytes, got 5000"},
  };
}

class BadManifestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadManifestTest, IsRejectedNamingTheField) {
  const BadCase& c = GetParam();
  std::vector<FieldError> errors;
  absl::StatusOr<JobSpec> spec = ParseManifest(c.manifest, &errors);
  ASSERT_FALSE(spec.ok()) << c.label;
  EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
  bool found = false;
  std::ostringstream all;
  for (const auto& e : errors) {
    all << e.field << ": " << e.problem << "\n";
    if (e.field == c.field && e.problem.find(c.problem_contains) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << c.label << ": expected " << c.field << " ~ '" << c.problem_contains
                     << "', got:\n"
                     << all.str();
  EXPECT_THAT(std::string(spec.status().message()), ::testing::HasSubstr(c.field));
}

INSTANTIATE_TEST_SUITE_P(All, BadManifestTest, ::testing::ValuesIn(BadCases()),
                         [](const auto& info) {
                           std::string n = info.param.label;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(JobSpecTest, ReportsEveryProblemAtOnce) {
  std::vector<FieldError> errors;
  auto spec = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: -1, batch_size: 0}\n", &errors);
  ASSERT_FALSE(spec.ok());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "training.epochs");
  EXPECT_EQ(errors[1].field, "training.batch_size");
}

TEST(JobSpecTest, FillsDefaults) {
  auto spec = ParseManifest(kGood);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->training.batch_size, 64);
  EXPECT_EQ(spec->training.optimizer, "adam");
  EXPECT_DOUBLE_EQ(spec->EffectiveLearningRate(), 1e-3);
  EXPECT_EQ(spec->data.dataset, "fashion-mnist");
  EXPECT_EQ(spec->data.path, "");
  EXPECT_FALSE(SpecToJson(*spec)["data"].contains("path"));
  EXPECT_EQ(spec->resources.learners, 1);
  EXPECT_EQ(spec->EffectiveThreads(), 1);
  EXPECT_FALSE(spec->targets.deliver.has_value());
}

TEST(JobSpecTest, AParameterServerJobDefaultsToAspOnOneServerAndScalesItsRateOnlyForBsp) {
  auto asp = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, optimizer: sgd, sync: ps}\n"
      "resources: {learners: 4}\n");
  ASSERT_TRUE(asp.ok()) << asp.status();
  EXPECT_TRUE(asp->UsesParameterServer());
  EXPECT_EQ(asp->training.ps.consistency, "asp");
  EXPECT_EQ(asp->training.ps.servers, 1);
  // Each version is one learner's batch: the rate of one learner.
  EXPECT_DOUBLE_EQ(asp->ScaledLearningRate(4), 0.01);
  EXPECT_EQ(SpecToJson(*asp)["training"]["sync"], "ps");
  auto bsp = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, optimizer: sgd, sync: ps, ps: "
      "{consistency: bsp}}\nresources: {learners: 4}\n");
  ASSERT_TRUE(bsp.ok()) << bsp.status();
  EXPECT_DOUBLE_EQ(bsp->ScaledLearningRate(4), 0.04);  // a version averages 4 batches
  auto ssp = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps, ps: {consistency: "
      "ssp, staleness: 7}}\n");
  ASSERT_TRUE(ssp.ok()) << ssp.status();
  EXPECT_EQ(ssp->training.ps.staleness, 7);
  EXPECT_EQ(ssp->ParameterServers(), 0);  // one server: shared memory, not a weft-ps process
  // Sharded over weft-ps servers, the learners may spread over nodes.
  auto sharded = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, sync: ps, ps: {servers: 2}}\n"
      "resources: {learners: 2, placement: spread}\n");
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(sharded->ParameterServers(), 2);
  EXPECT_EQ(SpecToJson(*sharded)["training"]["ps"]["servers"], 2);
  EXPECT_EQ(ParseManifest(kGood)->ParameterServers(), 0);
  // An allreduce job's JSON (and so its digest) has no sync field.
  EXPECT_FALSE(SpecToJson(*ParseManifest(kGood))["training"].contains("sync"));
}

TEST(JobSpecTest, LearningRateScalesWithTheGang) {
  auto adam = ParseManifest(std::string(kGood) + "resources: {learners: 4}\n");
  ASSERT_TRUE(adam.ok()) << adam.status();
  EXPECT_EQ(adam->resources.learners, 4);
  EXPECT_EQ(adam->EffectiveLrScaling(), "sqrt");
  EXPECT_DOUBLE_EQ(adam->ScaledLearningRate(1), 1e-3);
  EXPECT_DOUBLE_EQ(adam->ScaledLearningRate(4), 2e-3);
  auto sgd = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\n"
      "training: {epochs: 1, optimizer: sgd, learning_rate: 0.05}\nresources: {learners: 2}\n");
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  EXPECT_EQ(sgd->EffectiveLrScaling(), "linear");
  EXPECT_DOUBLE_EQ(sgd->ScaledLearningRate(2), 0.1);
  auto none = ParseManifest(
      "name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1, lr_scaling: none}\n");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_DOUBLE_EQ(none->ScaledLearningRate(8), 1e-3);
}

TEST(JobSpecTest, AGangOnOneNodeTrainsAsOneLearnerWithTheGangsBatchRateAndThreads) {
  auto gang =
      ParseManifest(std::string(kGood) + "resources: {learners: 2, cpus: 1.5, memory_mb: 1000}\n");
  ASSERT_TRUE(gang.ok()) << gang.status();
  EXPECT_EQ(gang->resources.gang_on_one_host, "one_learner");
  EXPECT_EQ(gang->LearnersAsOne({"a", "a"}), 2);
  EXPECT_EQ(gang->LearnersAsOne({"a", "b"}), 1) << "spread over two nodes: a gang";
  EXPECT_EQ(gang->LearnersAsOne({"a"}), 1);
  const JobSpec one = gang->AsOneLearner(2);
  EXPECT_EQ(one.training.batch_size, 2 * gang->training.batch_size);
  EXPECT_DOUBLE_EQ(one.ScaledLearningRate(1), gang->ScaledLearningRate(2));
  EXPECT_DOUBLE_EQ(one.ScaledLearningRate(2), gang->ScaledLearningRate(2)) << "not scaled again";
  EXPECT_EQ(one.EffectiveThreads(), 2 * gang->EffectiveThreads()) << "1 each of cpus 1.5";
  EXPECT_EQ(one.resources.memory_mb, 2000);
  EXPECT_EQ(one.resources.learners, 1);
  // The default is not in the canonical form (a spec from before the field keeps its digest);
  // the opt-out is, and reads back.
  EXPECT_FALSE(SpecToJson(*gang)["resources"].contains("gang_on_one_host"));
  auto kept =
      ParseManifest(std::string(kGood) + "resources: {learners: 2, gang_on_one_host: learners}\n");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->LearnersAsOne({"a", "a"}), 1);
  auto back = ParseManifest(SpecToJson(*kept).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->resources.gang_on_one_host, "learners");
  // Jobs whose learners cannot train as one: elastic, parameter server, the tenant's program.
  auto elastic = ParseManifest(std::string(kGood) + "resources: {learners: {min: 1, max: 2}}\n");
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  EXPECT_EQ(elastic->LearnersAsOne({"a", "a"}), 1);
  auto ps = ParseManifest(
      "name: x\nmodel: {architecture: mlp}\ntraining: {epochs: 1, sync: ps}\n"
      "resources: {learners: 2}\n");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->LearnersAsOne({"a", "a"}), 1);
  auto bad = ParseManifest(std::string(kGood) + "resources: {gang_on_one_host: one}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("resources.gang_on_one_host"));
}

TEST(JobSpecTest, ElasticLearnersAreARangeAndRoundTrip) {
  auto spec = ParseManifest(std::string(kGood) + "resources: {learners: {min: 1, max: 3}}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->resources.elastic);
  EXPECT_EQ(spec->resources.min_learners, 1);
  EXPECT_EQ(spec->resources.learners, 3);
  nlohmann::json j = SpecToJson(*spec);
  EXPECT_EQ(j["resources"]["learners"], nlohmann::json({{"min", 1}, {"max", 3}}));
  auto again = ParseManifest(j.dump());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->resources.elastic);
  EXPECT_EQ(again->resources.min_learners, 1);
  EXPECT_EQ(again->resources.learners, 3);

  auto fixed = ParseManifest(std::string(kGood) + "resources: {learners: 2}\n");
  ASSERT_TRUE(fixed.ok());
  EXPECT_FALSE(fixed->resources.elastic);
  EXPECT_EQ(fixed->resources.min_learners, 2);
  EXPECT_EQ(SpecToJson(*fixed)["resources"]["learners"], 2);
}

TEST(JobSpecTest, BadElasticRangesNameTheField) {
  struct Case {
    const char* resources;
    const char* field;
    const char* problem;
  };
  for (const Case& c : {
           Case{"{learners: {min: 3, max: 2}}", "resources.learners.min", "must not exceed"},
           Case{"{learners: {min: 0, max: 2}}", "resources.learners.min", "positive integer"},
           Case{"{learners: {max: 2}}", "resources.learners.min", "is required"},
           Case{"{learners: {min: 1, max: 2000}}", "resources.learners.max", "up to 1024"},
           Case{"{learners: {min: 1, max: 2, step: 1}}", "resources.learners.step",
                "unknown field"},
           Case{"{learners: [1, 2]}", "resources.learners", "{min: M, max: N}"},
       }) {
    std::vector<FieldError> errors;
    auto spec = ParseManifest(std::string(kGood) + "resources: " + c.resources + "\n", &errors);
    ASSERT_FALSE(spec.ok()) << c.resources;
    ASSERT_FALSE(errors.empty()) << c.resources;
    EXPECT_EQ(errors[0].field, c.field) << c.resources;
    EXPECT_THAT(errors[0].problem, ::testing::HasSubstr(c.problem)) << c.resources;
  }
  std::vector<FieldError> errors;
  auto command = ParseManifest(
      "name: x\ncommand: [python3, train.py]\ncode: c.tar.gz\n"
      "resources: {learners: {min: 1, max: 2}}\n",
      &errors);
  ASSERT_FALSE(command.ok());
  ASSERT_EQ(errors.size(), 1u) << command.status();
  EXPECT_EQ(errors[0].field, "resources.learners");
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("fixed number"));
}

// Weft's own learner trains on CPUs (Debian's libtorch has no CUDA): GPUs are for command jobs,
// whose program and image are the tenant's.
TEST(JobSpecTest, GpusAreRefusedForBuiltInModelsAndTakenByCommandJobs) {
  std::vector<FieldError> errors;
  auto builtin = ParseManifest(std::string(kGood) + "resources: {gpus: 1}\n", &errors);
  ASSERT_FALSE(builtin.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "resources.gpus");
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("no CUDA"));
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("command job"));
  auto command = ParseManifest(
      "name: x\ncommand: [python3, train.py]\ncode: c\nresources: {gpus: 2}\n", &errors);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->resources.gpus, 2);
}

TEST(JobSpecTest, JsonManifestIsAccepted) {
  auto spec = ParseManifest(
      R"({"name": "j", "model": {"architecture": "mlp", "hidden_units": [32, 16]},
          "training": {"epochs": 2, "optimizer": "sgd", "momentum": 0.5},
          "targets": {"deliver": 0.8, "complete": 0.9}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.hidden_units, (std::vector<int>{32, 16}));
  EXPECT_DOUBLE_EQ(spec->training.momentum, 0.5);
  EXPECT_DOUBLE_EQ(spec->EffectiveLearningRate(), 1e-2);
  EXPECT_DOUBLE_EQ(*spec->targets.complete, 0.9);
}

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(WEFT_SOURCE_DIR) + "/examples/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GoodManifestTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoodManifestTest, RoundTripsThroughCanonicalJson) {
  std::string text = GetParam();
  if (text.rfind("example:", 0) == 0) text = ReadExample(text.substr(8));
  ASSERT_FALSE(text.empty());
  auto spec = ParseManifest(text);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string canonical = SpecToJson(*spec).dump();
  auto again = ParseManifest(canonical);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << canonical;
  EXPECT_TRUE(*again == *spec);
  EXPECT_EQ(SpecDigest(*again), SpecDigest(*spec));
}

INSTANTIATE_TEST_SUITE_P(
    All, GoodManifestTest,
    ::testing::Values(std::string(kGood), "example:fashion-mnist-cnn.yaml",
                      "example:fashion-mnist-mlp-smoke.yaml",
                      "example:fashion-mnist-cnn-2-learners.yaml",
                      "name: own\nmodel: {torchscript: net.pt}\ntraining: {epochs: 1}\n",
                      "name: own-data\nmodel: {architecture: mlp}\ndata: {artifact: blobs.pt, "
                      "train_samples: 100}\ntraining: {epochs: 1}\n",
                      "name: c\ncommand: [./run]\ncode: c\ndata: {artifact: d}\n",
                      "name: s\nmodel: {architecture: mlp}\ntraining: {epochs: 1, optimizer: sgd, "
                      "momentum: 0.8, learning_rate: 0.05, weight_decay: 0.0001, seed: 7}\n"
                      "resources: {cpus: 0.5, memory_mb: 512}\n"));

TEST(JobSpecTest, AMultiLineDescriptionIsText) {
  auto spec = ParseManifest(std::string(kGood) + "description: |\n  line one\n  \tline two\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->description, "line one\n\tline two\n");
}

TEST(JobSpecTest, ErrorsEchoUntrustedTextEscaped) {
  std::vector<FieldError> errors;
  auto spec = ParseManifest(std::string(kGood) + "\"evil\\nkey\\e[0m\": 1\n", &errors);
  ASSERT_FALSE(spec.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "evil\\nkey\\x1b[0m") << "no raw newline or escape is echoed";
}

TEST(JobSpecTest, TheYamlParsersOwnErrorIsEscapedToo) {
  // Found by fuzz_manifest: yaml-cpp quotes the bad escape it met, control character and all.
  std::vector<FieldError> errors;
  auto spec = ParseManifest("name: \"a\\\x03\"\n", &errors);
  ASSERT_FALSE(spec.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "(document)");
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("unknown escape character: \\x03"));
  EXPECT_EQ(TextProblem(errors[0].problem), "");
}

TEST(JobSpecTest, EveryUnknownKeyIsNamed) {
  // Found by fuzz_manifest: an empty key gave a problem with an empty field.
  std::vector<FieldError> errors;
  ASSERT_FALSE(ParseManifest(std::string(kGood) + "\"\": 1\n? [a, b]\n: 2\n", &errors).ok());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "\"\"");
  EXPECT_EQ(errors[1].field, "(a key that is not text)");
}

TEST(JobSpecTest, ThreadsAreCappedAtTheCpusGranted) {
  // A code review's finding: cpus 0.001 with threads 256 ran 256 threads.
  auto spec = ParseManifest(std::string(kGood) + "resources: {cpus: 0.001}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->training.threads = 256;
  std::vector<FieldError> errors;
  absl::Status s = CheckResourceFit(*spec, &errors);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "training.threads");
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("at most 1 threads"));
  EXPECT_EQ(spec->EffectiveThreads(), 1);  // a spec stored before the check runs capped too
  spec->resources.cpus = 2.5;
  spec->training.threads = 2;
  EXPECT_TRUE(CheckResourceFit(*spec, nullptr).ok());
  EXPECT_EQ(spec->EffectiveThreads(), 2);
  spec->training.threads = 0;
  EXPECT_EQ(spec->EffectiveThreads(), 2);
}

TEST(JobSpecTest, AModelWhoseTrainingStateCannotFitMemoryIsRefused) {
  // A code review's finding: memory_mb 64 was accepted for an MLP of 34 GiB.
  auto spec = ParseManifest(
      "name: wide\nmodel: {architecture: mlp, hidden_units: [65536, 65536, 65536]}\n"
      "training: {epochs: 1}\nresources: {memory_mb: 64}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // 784*65536 + 2*65536*65536 + 65536*10 weights, 3*65536 + 10 biases; x4 (adam) x4 bytes.
  const int64_t params = 784LL * 65536 + 2LL * 65536 * 65536 + 65536LL * 10 + 3 * 65536 + 10;
  EXPECT_EQ(ModelParameters(spec->model), params);
  EXPECT_EQ(TrainingStateBytes(*spec), params * 16);
  std::vector<FieldError> errors;
  EXPECT_FALSE(CheckResourceFit(*spec, &errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "resources.memory_mb");
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("64 MiB cannot hold the mlp's"));
  EXPECT_THAT(errors[0].problem, ::testing::HasSubstr("(131870 MiB)"));
  // SGD without momentum keeps only parameters and gradients: half of Adam's.
  spec->training.optimizer = "sgd";
  spec->training.momentum = 0;
  EXPECT_EQ(TrainingStateBytes(*spec), params * 8);
  spec->resources.memory_mb = 65935;
  EXPECT_TRUE(CheckResourceFit(*spec, nullptr).ok());
  // The built-in CNN with Adam: 421,642 parameters, 6.4 MiB of state.
  spec->model = ModelSpec{"cnn", {}, ""};
  spec->training.optimizer = "adam";
  EXPECT_EQ(TrainingStateBytes(*spec), 421642 * 16);
}

TEST(JobSpecTest, ACommandJobNeedsCodeAndNoModelAndRoundTrips) {
  auto spec = ParseManifest(R"(
name: own-code
command: [python3, train.py, --epochs, "3"]
code: fmnist-code
data: {dataset: fashion-mnist}
training: {threads: 1}
resources: {learners: 2}
targets: {deliver: 0.85}
checkpoint: {keep: 3}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->IsCommandJob());
  EXPECT_EQ(spec->command, (std::vector<std::string>{"python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(spec->code, "fmnist-code");
  EXPECT_EQ(spec->data.dataset, "fashion-mnist");
  EXPECT_EQ(spec->checkpoint.keep, 3);
  EXPECT_EQ(ModelParameters(spec->model), 0);
  auto again = ParseManifest(SpecToJson(*spec).dump());
  ASSERT_TRUE(again.ok()) << again.status() << SpecToJson(*spec).dump();
  EXPECT_EQ(*again, *spec);

  // Without data, a command job reads no data set.
  auto bare = ParseManifest("name: x\ncommand: [./run]\ncode: c\n");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->data.dataset, "");
  EXPECT_EQ(*ParseManifest(SpecToJson(*bare).dump()), *bare);
}

TEST(JobSpecTest, ATenantsOwnDataSetReplacesTheDefault) {
  auto spec = ParseManifest(std::string(kGood) + "data: {artifact: blobs.pt}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data.artifact, "blobs.pt");
  EXPECT_EQ(spec->data.dataset, "") << "not fashion-mnist: the artifact is the data set";
  const nlohmann::json j = SpecToJson(*spec);
  EXPECT_EQ(j["data"].value("artifact", ""), "blobs.pt");
  EXPECT_FALSE(j["data"].contains("dataset")) << j.dump();
}

TEST(JobSpecTest, ACommandJobsMistakesNameTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {"name: x\ncommand: [python3]\n", "code: is required with command"},
      {"name: x\ncommand: []\ncode: c\n", "command: must be a list of 1 to 64 strings"},
      {"name: x\ncommand: python3 train.py\ncode: c\n", "command: must be a list"},
      {"name: x\ncommand: [python3, [a]]\ncode: c\n", "command[1]: must be a string"},
      {"name: x\ncommand: [\"\"]\ncode: c\n", "command[0]: must name the program"},
      {"name: x\ncommand: [\"a\\x01\"]\ncode: c\n", "command[0]: must be UTF-8 text"},
      {"name: x\ncommand: [a]\ncode: ../c\n", "code: names an artifact"},
      {"name: x\ncommand: [a]\ncode: c\nmodel: {architecture: cnn}\n",
       "model: does not apply to a command job"},
      {"name: x\ncommand: [a]\ncode: c\ntraining: {epochs: 3}\n", "training.epochs: unknown field"},
      {"name: x\ncommand: [a]\ncode: c\ndata: {path: /x}\n", "data.path: unknown field"},
      {"name: x\ncommand: [a]\ncode: c\ndata: {}\n",
       "data: names data.dataset or data.artifact when it is given"},
      {"name: x\ncommand: [a]\ncode: c\ncheckpoint: {every_steps: 5}\n",
       "checkpoint.every_steps: does not apply to a command job"},
      {"name: x\nmodel: {architecture: cnn}\ntraining: {epochs: 1}\ncode: c\n",
       "code: applies only to a command job"},
  };
  for (const auto& [manifest, problem] : cases) {
    auto spec = ParseManifest(manifest);
    ASSERT_FALSE(spec.ok()) << manifest;
    EXPECT_THAT(std::string(spec.status().message()), ::testing::HasSubstr(problem)) << manifest;
  }
}

// checkpoint.at_end: kept through the canonical JSON (the learner reads that), part of the
// digest only when set, and refused where the learner does not checkpoint.
TEST(JobSpecTest, ACheckpointAtTheEndIsKeptThroughTheSpecAndRefusedForCommandJobs) {
  auto plain = ParseManifest(kGood);
  auto at_end = ParseManifest(std::string(kGood) + "checkpoint: {at_end: true}\n");
  ASSERT_TRUE(plain.ok() && at_end.ok()) << at_end.status();
  EXPECT_FALSE(plain->checkpoint.at_end);
  EXPECT_TRUE(at_end->checkpoint.at_end);
  auto again = ParseManifest(SpecToJson(*at_end).dump());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->checkpoint.at_end);
  EXPECT_NE(SpecDigest(*plain), SpecDigest(*at_end));
  EXPECT_FALSE(SpecToJson(*plain)["checkpoint"].contains("at_end"))
      << "a job that does not ask keeps the digest it always had";
  for (const auto& [manifest, problem] : std::vector<std::pair<std::string, std::string>>{
           {std::string(kGood) + "checkpoint: {at_end: yes}\n",
            "checkpoint.at_end: must be true or false, got 'yes'"},
           {"name: x\ncommand: [a]\ncode: c\ncheckpoint: {at_end: true}\n",
            "checkpoint.at_end: does not apply to a command job"}}) {
    auto spec = ParseManifest(manifest);
    ASSERT_FALSE(spec.ok()) << manifest;
    EXPECT_THAT(std::string(spec.status().message()), ::testing::HasSubstr(problem));
  }
}

TEST(JobSpecTest, DigestChangesWithConfiguration) {
  auto a = ParseManifest(kGood);
  auto b = ParseManifest(std::string(kGood) + "resources: {cpus: 2}\n");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(SpecDigest(*a), SpecDigest(*b));
}

}  // namespace
}  // namespace weft
