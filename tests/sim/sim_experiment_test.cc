// weft-sim's experiments (sim/experiment.h): ASHA over an application's measured batch sizes,
// its trials jobs of the simulated cluster beside the workload's.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/policies.h"
#include "sim/experiment.h"
#include "sim/simulator.h"
#include "sim/traces.h"

namespace weft::sim {
namespace {

using ::testing::HasSubstr;

std::string AppTraces() { return weft::testing::TracesDir() + "/pollux/app-traces"; }

SimOptions OneNode(int gpus) {
  SimOptions o;
  o.nodes = 1;
  o.gpus_per_node = gpus;
  return o;
}

SimExperiment Search(std::vector<int> batch_sizes, int eta, int min_epochs, int max_epochs,
                     int trials, int concurrent) {
  SimExperiment e;
  e.name = "search";
  e.app = "cifar10";
  e.batch_sizes = std::move(batch_sizes);
  e.asha.eta = eta;
  e.asha.min_resource = min_epochs;
  e.asha.max_resource = max_epochs;
  e.asha.max_trials = trials;
  e.max_concurrent_trials = concurrent;
  return e;
}

Workload Cifar10Jobs(int n, double submit_s) {
  Workload w;
  w.name = "cifar10-jobs";
  for (int i = 0; i < n; ++i) {
    WorkloadJob j;
    j.name = "job" + std::to_string(i);
    j.app = "cifar10";
    j.submit_s = submit_s;
    j.replicas = 1;
    j.batch_size = 128;
    w.jobs.push_back(j);
  }
  return w;
}

// By hand (validation-128.csv and validation-4096.csv, the metric after 1 and 2 epochs): rung 0
// (1 epoch) gives B=128 0.4455 and B=4096 0.3743; with two results the top ⌊2/2⌋ = 1, the B=128
// trial, is promoted to rung 1 (2 epochs), resumed where it stopped, and ends at 0.6007. A grid
// would have trained both batches 2 epochs (4 epochs) for the same best.
TEST(SimExperimentTest, AshaPromotesTheBatchWhoseCurveIsAheadAndResumesItWithoutRetraining) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  scheduler::FifoPolicy fifo;
  auto r = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(1),
                    {Search({128, 4096}, 2, 1, 2, 2, 1)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->experiments.size(), 1u);
  const ExperimentResult& e = r->experiments[0];
  EXPECT_EQ(e.trials, 2);
  ASSERT_TRUE(e.best.has_value());
  EXPECT_DOUBLE_EQ(*e.best, 0.6007);
  EXPECT_EQ(e.best_batch_size, 128);
  EXPECT_DOUBLE_EQ(e.grid_best, 0.6007);
  EXPECT_EQ(e.epochs, 3) << "the promoted trial trained 1 more epoch, not 2 again";
  EXPECT_EQ(e.grid_epochs, 4);
  for (const TrialResult& t : e.trial_results) {
    if (t.batch_size == 128) {
      EXPECT_EQ(t.epochs, 2);
      EXPECT_EQ(t.rung, 1);
      EXPECT_EQ(t.restarts, 1) << "one resume from its checkpoint";
      EXPECT_DOUBLE_EQ(*t.metric, 0.6007);
    } else {
      EXPECT_EQ(t.epochs, 1);
      EXPECT_EQ(t.restarts, 0);
      EXPECT_DOUBLE_EQ(*t.metric, 0.3743);
    }
  }
  EXPECT_GT(e.completion_s, e.submit_s);
  EXPECT_GT(e.best_found_s, 0);
  EXPECT_LE(e.best_found_s, e.completion_s - e.submit_s);
  EXPECT_TRUE(r->jobs.empty()) << "trials are not the workload's jobs";
  EXPECT_GE(r->makespan_s, e.completion_s);
}

TEST(SimExperimentTest, TheFirstTrialsTryEveryBatchOnceAndNoMoreRunThanAllowed) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  scheduler::FifoPolicy fifo;
  SimExperiment search = Search({}, 3, 1, 9, 6, 2);  // the six measured batch sizes
  auto r = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(4), {search});
  ASSERT_TRUE(r.ok()) << r.status();
  const ExperimentResult& e = r->experiments.at(0);
  std::set<int> tried;
  for (const TrialResult& t : e.trial_results) tried.insert(t.batch_size);
  EXPECT_EQ(tried, (std::set<int>{128, 256, 512, 1024, 2048, 4096}));
  for (const auto& [t, gpus] : r->allocated_gpus) {
    EXPECT_LE(gpus, 2) << "at t=" << t << ": max_concurrent_trials is 2";
  }
  EXPECT_LT(e.epochs, e.grid_epochs);
  ASSERT_TRUE(e.best.has_value());
  EXPECT_LE(*e.best, e.grid_best);
  double best_trial = 0;
  for (const TrialResult& t : e.trial_results) best_trial = std::max(best_trial, *t.metric);
  EXPECT_DOUBLE_EQ(*e.best, best_trial);

  // The same seed, the same search; another seed draws the batches in another order.
  auto again = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(4), {search});
  ASSERT_TRUE(again.ok());
  search.seed = 2;
  auto other = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(4), {search});
  ASSERT_TRUE(other.ok());
  std::vector<int> first, second, third;
  for (const TrialResult& t : e.trial_results) first.push_back(t.batch_size);
  for (const TrialResult& t : again->experiments[0].trial_results) second.push_back(t.batch_size);
  for (const TrialResult& t : other->experiments[0].trial_results) third.push_back(t.batch_size);
  EXPECT_EQ(first, second);
  EXPECT_NE(first, third);
  EXPECT_EQ(e.epochs, again->experiments[0].epochs);
}

// Under FIFO the search's trials hold both GPUs when two jobs arrive: the jobs wait for the
// running trials' rungs, and the trials started after them wait for the jobs.
TEST(SimExperimentTest, TrialsAndTheWorkloadsJobsShareTheClusterUnderThePolicy) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  const Workload jobs = Cifar10Jobs(2, 600);
  const SimExperiment search = Search({128, 512, 2048, 4096}, 2, 2, 8, 4, 2);
  scheduler::FifoPolicy fifo;
  auto alone = Simulate(jobs, apps, fifo, JobMode::kRigid, OneNode(2));
  auto search_alone = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(2), {search});
  auto both = Simulate(jobs, apps, fifo, JobMode::kRigid, OneNode(2), {search});
  ASSERT_TRUE(alone.ok() && search_alone.ok() && both.ok()) << both.status();
  ASSERT_EQ(both->jobs.size(), 2u);
  EXPECT_GT(both->avg_jct_s, alone->avg_jct_s) << "the jobs waited for the trials";
  const double search_s = search_alone->experiments[0].completion_s;
  EXPECT_GT(both->experiments[0].completion_s, search_s) << "and trials for the jobs";
  // ASHA is asynchronous: when results come in decides what is promoted, so the search is not
  // the same search either (it trained 16 epochs alone, 18 beside the jobs, when this was
  // written); each still ends with every trial's last result in.
  EXPECT_EQ(both->experiments[0].trials, 4);
  EXPECT_EQ(both->experiments[0].trial_results.size(), 4u);
  for (const TrialResult& t : both->experiments[0].trial_results) EXPECT_TRUE(t.metric) << t.name;
  EXPECT_GT(both->gpu_utilisation, 0);
  EXPECT_LE(both->gpu_utilisation, 1.0);
}

TEST(SimExperimentTest, AnExperimentsFileIsReadAndABadOneNamesTheLineAndColumn) {
  char dir[] = "/tmp/weft-sim-exp-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/experiments.csv";
  const std::string header =
      "name,time,application,gpus,eta,min_epochs,max_epochs,max_trials,max_concurrent_trials,"
      "seed";
  auto read = [&](const std::string& text) {
    std::ofstream(path) << text;
    return ReadExperiments(path);
  };
  auto e = read(header + ",tenant,batch_sizes\nhpo,3600,cifar10,1,3,1,9,16,4,7,team-a,128;512\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 1u);
  EXPECT_EQ((*e)[0].name, "hpo");
  EXPECT_EQ((*e)[0].submit_s, 3600);
  EXPECT_EQ((*e)[0].asha.max_trials, 16);
  EXPECT_EQ((*e)[0].max_concurrent_trials, 4);
  EXPECT_EQ((*e)[0].seed, 7u);
  EXPECT_EQ((*e)[0].tenant, "team-a");
  EXPECT_EQ((*e)[0].batch_sizes, (std::vector<int>{128, 512}));
  e = read(header + "\nhpo,0,cifar10,1,1,1,9,16,4,7\n");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("experiments.csv:2: eta"));
  e = read(header + "\nhpo,0,cifar10,two,3,1,9,16,4,7\n");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("experiments.csv:2 gpus: 'two' is not a positive integer"));
  unlink(path.c_str());
  rmdir(dir);

  // A space the app was not measured at, and more epochs than it has, are refused.
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  scheduler::FifoPolicy fifo;
  auto r =
      Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(1), {Search({100}, 2, 1, 2, 2, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not measured at batch size 100"));
  r = Simulate(Workload{}, apps, fifo, JobMode::kRigid, OneNode(1),
               {Search({128}, 2, 1, 101, 2, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("max_epochs 101 is more than"));
}

}  // namespace
}  // namespace weft::sim
