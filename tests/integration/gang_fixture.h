// The fixtures of the gang and elastic integration tests: a real weftd on logical nodes of one cpu
// each, with the audit on for every job, and the helpers those tests share.
#ifndef WEFT_TESTS_INTEGRATION_GANG_FIXTURE_H_
#define WEFT_TESTS_INTEGRATION_GANG_FIXTURE_H_

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft::testing {

using json = nlohmann::json;
using ::testing::HasSubstr;

class GangTest : public WeftdTest {
 protected:
  // Logical nodes of `node_cpus_` cpus each (`nodes_` of them); every job's samples are
  // recorded for ExpectExactAudit().
  WeftdTestOptions Options() const override {
    WeftdTestOptions o("gang");
    o.fashion_mnist = true;
    o.nodes = "nodes:\n";
    for (int i = 0; i < nodes_; ++i) {
      o.nodes += "  - {name: node-" + std::string(1, static_cast<char>('a' + i)) +
                 ", cpus: " + std::to_string(node_cpus_) + ", memory_mb: 8192}\n";
    }
    o.env = {"WEFT_LEARNER_AUDIT=1"};
    return o;
  }

  // `weft audit`: every sample of each of `epochs` epochs of 12,000 trained by exactly one
  // applied step of the job's lineage.
  void ExpectExactAudit(const std::string& id, int epochs) {
    auto r = weftd_->Cli({"audit", id});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (int e = 1; e <= epochs; ++e) {
      EXPECT_THAT(r.output, HasSubstr("epoch " + std::to_string(e) +
                                      ": 12000 samples, 12000 once, 0 missing, 0 twice"));
    }
  }
  // The job's running learners by id: their pids.
  std::map<int, int64_t> PidsById(const json& j) {
    std::map<int, int64_t> out;
    for (const auto& l : j["learners"]) {
      if (l["pid"].is_number()) out[l.value("id", -1)] = l["pid"].get<int64_t>();
    }
    return out;
  }
  std::string History(const json& j) { return testing::HistoryText(j); }
  static std::vector<std::string> Matches(const std::string& text, const std::string& pattern) {
    std::vector<std::string> out;
    std::regex re(pattern);
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
      out.push_back((*it)[1].str());
    }
    return out;
  }

  // Logical nodes (two, unless a test says otherwise: a 2-learner gang must spread) and cpus
  // of each; a fixture sets them in its constructor.
  int nodes_ = 2;
  int node_cpus_ = 1;
};

// One logical node of two cpus: a 2-learner gang is placed on one host.
class OneHostGangTest : public GangTest {
 protected:
  OneHostGangTest() {
    nodes_ = 1;
    node_cpus_ = 2;
  }
  // Submits `name`: the MLP on 12,000 images for 40 epochs (≈ 3,800 steps: seconds, as one
  // learner, so a test can act mid-training) as a 2-learner gang of one cpu each, seed 3, and
  // waits for its 30th step; the job's id.
  std::string StartLongOneHostGang(const std::string& name) {
    const std::string id =
        Submit(name,
               "model: {architecture: mlp, hidden_units: [128]}\n"
               "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
               "training: {epochs: 40, batch_size: 64, threads: 1, seed: 3}\n"
               "resources: {learners: 2, cpus: 1}\n");
    WaitUntil(
        id, [](const json& j) { return j["progress"].value("step", 0) >= 30; }, 300, "30 steps");
    return id;
  }
};

// Three logical nodes: room for an elastic job of up to 3 learners.
class ElasticGangTest : public GangTest {
 protected:
  ElasticGangTest() { nodes_ = 3; }
  // The MLP on 12,000 images (2,000 to test) for `epochs` epochs, batch 64 per learner, seed 3,
  // with `learners` (YAML: `3` or `{min: 1, max: 3}`) of one cpu.
  static std::string MlpJob(int epochs, const std::string& learners) {
    return "model: {architecture: mlp, hidden_units: [128]}\n"
           "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
           "training: {epochs: " +
           std::to_string(epochs) +
           ", batch_size: 64, threads: 1, seed: 3}\n"
           "resources: {learners: " +
           learners + ", cpus: 1}\n";
  }
  // Submits an elastic MLP job {min 1, max 3} of `epochs` epochs (plus `extra` manifest lines)
  // and waits until its 3 learners are past step `past_step`; their pids by id in *pids.
  std::string StartElastic(int epochs, int past_step, const std::string& extra,
                           std::map<int, int64_t>* pids) {
    const std::string id = Submit("elastic", MlpJob(epochs, "{min: 1, max: 3}") + extra);
    json j = WaitUntil(
        id,
        [past_step](const json& j) {
          return j["learners"].size() == 3 && j["progress"].value("step", 0) >= past_step;
        },
        300, "3 learners past step " + std::to_string(past_step));
    *pids = PidsById(j);
    EXPECT_EQ(pids->size(), 3u) << j.dump(2);
    return id;
  }
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_GANG_FIXTURE_H_
