// The live replay's mapping (sim/replay.h): trace jobs -> manifests weftd accepts, with the
// trace's order, scaled arrivals, capped learners, budgets in proportion to the trace job's
// GPU-seconds and deliver targets where the application's curve puts them.
#include "sim/replay.h"

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/job_spec.h"
#include "scheduler/policies.h"
#include "sim/simulator.h"
#include "sim/traces.h"

namespace weft::sim {
namespace {

using ::testing::HasSubstr;

std::string AppTraces() { return weft::testing::TracesDir() + "/pollux/app-traces"; }

WorkloadJob TraceJob(std::string name, double at, std::string app, int replicas, int batch) {
  WorkloadJob j;
  j.name = std::move(name);
  j.submit_s = at;
  j.app = std::move(app);
  j.replicas = replicas;
  j.batch_size = batch;
  return j;
}

// Three jobs out of order, as a file may hold them; the first by time is at 100 s.
Workload ThreeJobs() {
  Workload w;
  w.name = "three";
  w.jobs = {TraceJob("cifar10-1", 400, "cifar10", 6, 2048), TraceJob("ncf-0", 100, "ncf", 1, 32768),
            TraceJob("deepspeech2-2", 1100, "deepspeech2", 12, 640)};
  return w;
}

ReplayOptions Options() {
  ReplayOptions o;
  o.jobs = 2;
  o.time_scale = 0.1;
  o.work_scale = 0.01;
  o.learner_cap = 4;
  o.max_epochs = 6;
  o.profiles["cnn"] = {30.0, {0.70, 0.78, 0.81, 0.83, 0.84, 0.85}, {}, -1};
  o.profiles["mlp"] = {2.0, {0.75, 0.80, 0.82, 0.83, 0.84, 0.845}, {}, -1};
  return o;
}

// All three jobs, elastic.
ReplayOptions ElasticThree() {
  ReplayOptions o = Options();
  o.jobs = 3;
  o.elastic = true;
  return o;
}

TEST(ReplayTest, TakesTheFirstJobsByTimeAndScalesTheirArrivals) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  auto plan = PlanReplay(ThreeJobs(), apps, Options());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].name, "ncf-0");
  EXPECT_DOUBLE_EQ((*plan)[0].submit_s, 0);
  EXPECT_EQ((*plan)[1].name, "cifar10-1");
  EXPECT_DOUBLE_EQ((*plan)[1].submit_s, 30);  // (400 - 100) s × 0.1
  EXPECT_EQ((*plan)[0].model, "mlp");
  EXPECT_EQ((*plan)[1].model, "cnn");
}

TEST(ReplayTest, AFixedGangGetsTheCappedReplicasAndAnElasticJobOneUpToThem) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  ReplayOptions o = Options();
  o.jobs = 3;
  auto fixed = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ((*fixed)[0].min_learners, 1);  // ncf asked for 1
  EXPECT_EQ((*fixed)[0].max_learners, 1);
  EXPECT_EQ((*fixed)[1].min_learners, 4);  // 6 replicas, capped at 4
  EXPECT_EQ((*fixed)[1].max_learners, 4);
  o.elastic = true;
  auto elastic = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  EXPECT_EQ((*elastic)[2].min_learners, 1);
  EXPECT_EQ((*elastic)[2].max_learners, 4);
}

// The trace job's GPU-seconds are what weft-sim's job takes alone on an empty cluster: the ideal
// run time with no restart delay is its JCT in the simulator, up to the simulator's rounding of
// each epoch to whole seconds (the artifact's) and the 1 s round it starts in.
TEST(ReplayTest, TheIdealRunTimeIsTheSimulatorsJctOfTheJobAlone) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  for (const WorkloadJob& t : ThreeJobs().jobs) {
    auto app = apps.Get(t.app);
    ASSERT_TRUE(app.ok()) << app.status();
    auto ideal = IdealSeconds(**app, t.batch_size, t.replicas, 4);
    ASSERT_TRUE(ideal.ok()) << ideal.status();
    Workload alone;
    alone.name = t.name;
    WorkloadJob j = t;
    j.submit_s = 0;
    alone.jobs = {j};
    SimOptions so;
    so.nodes = 4;
    so.interval_s = 1;
    so.restart_delay_s = 0;
    auto fifo = scheduler::MakePolicy("fifo");
    ASSERT_TRUE(fifo.ok());
    auto r = Simulate(alone, apps, **fifo, JobMode::kRigid, so);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->jobs.size(), 1u);
    EXPECT_NEAR(r->jobs[0].jct_s, *ideal, 0.5 * (*app)->max_epochs() + 2) << t.name;
    EXPECT_GT(*ideal, 10) << t.name;
  }
}

TEST(ReplayTest, TheBudgetIsTheTraceJobsGpuSecondsScaledAndClamped) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  ReplayOptions o = Options();
  o.jobs = 3;
  auto plan = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const ReplayJob& j : *plan) {
    auto app = apps.Get(j.app);
    ASSERT_TRUE(app.ok());
    const WorkloadJob* t = nullptr;
    for (const WorkloadJob& w : ThreeJobs().jobs) {
      if (w.name == j.name) t = &w;
    }
    ASSERT_NE(t, nullptr);
    EXPECT_DOUBLE_EQ(j.trace_gpu_seconds,
                     *IdealSeconds(**app, t->batch_size, t->replicas, 4) * t->replicas);
    const double epochs = j.trace_gpu_seconds * o.work_scale / o.profiles[j.model].epoch_seconds;
    EXPECT_EQ(j.epochs, std::clamp<int>(std::lround(epochs), o.min_epochs, o.max_epochs)) << j.name;
  }
  // A larger scale never shrinks a budget, and the clamp holds.
  o.work_scale = 100;
  auto big = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(big.ok());
  for (const ReplayJob& j : *big) EXPECT_EQ(j.epochs, o.max_epochs) << j.name;
}

TEST(ReplayTest, TheDeliverTargetSitsWhereTheApplicationsCurveMeetsWeftSimsTarget) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  ReplayOptions o = Options();
  o.jobs = 3;
  o.work_scale = 100;  // every budget is max_epochs = 6
  auto plan = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const ReplayJob& j : *plan) {
    const AppTrace* app = *apps.Get(j.app);
    const double fraction =
        app->TargetsAt(0.6).deliver_progress / app->EpochStart(app->max_epochs());
    EXPECT_DOUBLE_EQ(j.deliver_epoch_fraction, fraction);
    EXPECT_GT(fraction, 0);
    EXPECT_LE(fraction, 0.6 + 1e-9);
    const int epoch = std::max(1, static_cast<int>(std::ceil(fraction * 6 - 1e-9)));
    EXPECT_EQ(j.deliver_epoch, epoch) << j.name;
    EXPECT_DOUBLE_EQ(j.deliver_accuracy,
                     o.profiles[j.model].accuracy[epoch - 1] - o.deliver_margin);
  }
}

TEST(ReplayTest, EveryManifestIsAValidJobOfThePlannedShape) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  const ReplayOptions o = ElasticThree();
  auto plan = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const ReplayJob& j : *plan) {
    auto spec = ParseManifest(j.manifest);
    ASSERT_TRUE(spec.ok()) << j.name << ": " << spec.status() << "\n" << j.manifest;
    EXPECT_EQ(spec->name, j.name);
    EXPECT_EQ(spec->model.architecture, j.model);
    EXPECT_EQ(spec->training.epochs, j.epochs);
    EXPECT_EQ(spec->resources.learners, j.max_learners);
    EXPECT_EQ(spec->resources.min_learners, j.min_learners);
    EXPECT_EQ(spec->resources.elastic, j.min_learners != j.max_learners);
    EXPECT_EQ(spec->data.train_samples, o.train_samples);
    ASSERT_TRUE(spec->targets.deliver.has_value());
    EXPECT_NEAR(*spec->targets.deliver, j.deliver_accuracy, 1e-4);
  }
}

TEST(ReplayTest, BadOptionsAndProfilesAreRefusedNamingTheField) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  ReplayOptions o = Options();
  o.profiles.erase("mlp");
  auto missing = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no profile of model mlp"));
  o = Options();
  o.max_epochs = 9;  // the profiles have 6 epochs
  auto short_profile = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_FALSE(short_profile.ok());
  EXPECT_THAT(short_profile.status().message(), HasSubstr("cnn.accuracy"));
  o = Options();
  o.time_scale = 0;
  EXPECT_THAT(PlanReplay(ThreeJobs(), apps, o).status().message(), HasSubstr("time_scale"));
  Workload philly;
  philly.name = "philly";
  philly.duration_jobs = true;
  EXPECT_THAT(PlanReplay(philly, apps, Options()).status().message(), HasSubstr("no applications"));
  Workload unknown = ThreeJobs();
  unknown.jobs[1].app = "no-such-app";
  EXPECT_FALSE(PlanReplay(unknown, apps, Options()).ok());
}

TEST(ReplayTest, ProfilesParseFromJsonAndBadOnesNameTheField) {
  auto p = ParseProfiles(
      nlohmann::json::parse(R"({"cnn": {"epoch_seconds": 12.5, "accuracy": [0.7, 0.8]}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->at("cnn").epoch_seconds, 12.5);
  EXPECT_EQ(p->at("cnn").accuracy, (std::vector<double>{0.7, 0.8}));
  EXPECT_THAT(ParseProfiles(nlohmann::json::parse(R"({"rnn": {}})")).status().message(),
              HasSubstr("profiles.rnn"));
  EXPECT_THAT(
      ParseProfiles(nlohmann::json::parse(R"({"mlp": {"epoch_seconds": 1}})")).status().message(),
      HasSubstr("profiles.mlp"));
  EXPECT_THAT(
      ParseProfiles(nlohmann::json::parse(R"({"mlp": {"epoch_seconds": 1, "accuracy": [1.5]}})"))
          .status()
          .message(),
      HasSubstr("profiles.mlp.accuracy"));
  // Measured at several world sizes: sorted by learners (JSON's keys sort as text: "12" < "2").
  auto by = ParseProfiles(nlohmann::json::parse(
      R"({"mlp": {"epoch_seconds": 3, "accuracy": [0.8],
                  "epoch_seconds_by_learners": {"12": 4.0, "2": 2.5, "1": 2.0}}})"));
  ASSERT_TRUE(by.ok()) << by.status();
  EXPECT_EQ(by->at("mlp").by_learners,
            (std::vector<std::pair<int, double>>{{1, 2.0}, {2, 2.5}, {12, 4.0}}));
  EXPECT_DOUBLE_EQ(by->at("mlp").start_seconds, -1);  // not measured
  auto started = ParseProfiles(nlohmann::json::parse(
      R"({"mlp": {"epoch_seconds": 3, "accuracy": [0.8], "start_seconds": 1.5}})"));
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_DOUBLE_EQ(started->at("mlp").start_seconds, 1.5);
  EXPECT_THAT(ParseProfiles(nlohmann::json::parse(
                                R"({"mlp": {"epoch_seconds": 3, "accuracy": [0.8],
                                            "start_seconds": -2}})"))
                  .status()
                  .message(),
              HasSubstr("profiles.mlp.start_seconds"));
  for (const char* bad : {R"([1, 2])", R"({"0": 2})", R"({"two": 2})", R"({"2": -1})"}) {
    EXPECT_THAT(ParseProfiles(nlohmann::json::parse(
                                  absl::StrCat(R"({"mlp": {"epoch_seconds": 1, "accuracy": [0.8],
                                                "epoch_seconds_by_learners": )",
                                               bad, "}}")))
                    .status()
                    .message(),
                HasSubstr("profiles.mlp.epoch_seconds_by_learners"))
        << bad;
  }
  ReplayOptions o = Options();
  o.profiles["mlp"].epoch_seconds = 0;
  Workload none;
  AppCatalog apps(AppTraces());
  EXPECT_THAT(PlanReplay(none, apps, o).status().message(), HasSubstr("mlp.epoch_seconds"));
}

// A temporary file holding `text`, removed at the end of the test.
class TempCsv {
 public:
  explicit TempCsv(const std::string& text) {
    char name[] = "/tmp/weft-replay-test-XXXXXX.csv";
    int fd = mkstemps(name, 4);
    path_ = name;
    close(fd);
    std::ofstream(path_) << text;
  }
  ~TempCsv() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

SimResult SimulateProfiled(const std::string& csv, const std::string& policy, int nodes) {
  TempCsv file(csv);
  auto w = ReadWorkload(file.path());
  EXPECT_TRUE(w.ok()) << w.status();
  SimOptions so;
  so.nodes = nodes;
  so.gpus_per_node = 1;  // a logical node holds one learner
  so.interval_s = 1;
  so.restart_delay_s = 0;
  auto p = scheduler::MakePolicy(policy);
  EXPECT_TRUE(p.ok());
  AppCatalog none("/nonexistent");
  auto r = Simulate(*w, none, **p, JobModeFor(policy), so);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

constexpr char kHeader[] =
    "name,time,min_learners,max_learners,epochs,deliver_epochs,learner_seconds_per_epoch\n";

// Each of `rows` under `header` is refused, naming the file and its line.
void ExpectRefusedNamingTheLine(const std::string& header, std::vector<std::string> rows) {
  for (const std::string& row : rows) {
    TempCsv file(header + row + "\n");
    auto w = ReadWorkload(file.path());
    ASSERT_FALSE(w.ok()) << row;
    EXPECT_THAT(w.status().message(), HasSubstr(file.path() + ":2")) << row;
  }
}

TEST(ReplayTest, ThePlanIsWeftSimsProfiledWorkload) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  const ReplayOptions o = ElasticThree();
  auto plan = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  TempCsv file(SimCsv(*plan, o));
  auto w = ReadWorkload(file.path());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->profiled_jobs);
  EXPECT_FALSE(w->needs_apps());
  ASSERT_EQ(w->jobs.size(), plan->size());
  for (size_t i = 0; i < plan->size(); ++i) {
    const ReplayJob& j = (*plan)[i];
    const WorkloadJob& s = w->jobs[i];
    EXPECT_EQ(s.name, j.name);
    EXPECT_NEAR(s.submit_s, j.submit_s, 1e-3);
    EXPECT_EQ(s.min_replicas, j.min_learners);
    EXPECT_EQ(s.replicas, j.max_learners);
    EXPECT_EQ(s.epochs, j.epochs);
    EXPECT_EQ(s.deliver_epochs, j.deliver_epoch);
    EXPECT_NEAR(s.learner_seconds_per_epoch, o.profiles.at(j.model).epoch_seconds, 1e-4);
  }
}

// A profile measured at several world sizes reaches weft-sim: every row carries it (an MLP row
// none, as its model has none), and the jobs' learner-seconds per epoch follow it.
TEST(ReplayTest, AProfileMeasuredAtSeveralWorldSizesIsThePlansScaling) {
  WEFT_REQUIRE_TRACES();
  AppCatalog apps(AppTraces());
  ReplayOptions o = ElasticThree();
  o.profiles["cnn"].by_learners = {{1, 24.0}, {2, 27.0}, {4, 36.0}};
  auto plan = PlanReplay(ThreeJobs(), apps, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string csv = SimCsv(*plan, o);
  EXPECT_THAT(csv, HasSubstr(",learner_seconds_by_learners\n"));
  TempCsv file(csv);
  auto w = ReadWorkload(file.path());
  ASSERT_TRUE(w.ok()) << w.status();
  int cnn = 0;
  for (size_t i = 0; i < plan->size(); ++i) {
    const WorkloadJob& s = w->jobs[i];
    if ((*plan)[i].model == "cnn") {
      ++cnn;
      EXPECT_DOUBLE_EQ(s.LearnerSecondsPerEpoch(1), 24.0);
      EXPECT_DOUBLE_EQ(s.LearnerSecondsPerEpoch(3), 31.5);  // between 2 and 4
      EXPECT_DOUBLE_EQ(s.LearnerSecondsPerEpoch(8), 36.0);  // the largest measured
    } else {
      EXPECT_TRUE(s.learner_seconds_by_learners.empty());
      EXPECT_DOUBLE_EQ(s.LearnerSecondsPerEpoch(3), s.learner_seconds_per_epoch);
    }
  }
  EXPECT_GT(cnn, 0);
  // A measured start cost adds it, and the plan's resize cost, to every row.
  o.profiles["cnn"].start_seconds = 2.5;
  o.resize_seconds = 0.1;
  TempCsv costed(SimCsv(*plan, o));
  auto c = ReadWorkload(costed.path());
  ASSERT_TRUE(c.ok()) << c.status();
  for (size_t i = 0; i < plan->size(); ++i) {
    EXPECT_DOUBLE_EQ(c->jobs[i].start_seconds, (*plan)[i].model == "cnn" ? 2.5 : -1);
    EXPECT_DOUBLE_EQ(c->jobs[i].resize_seconds, 0.1);
  }
}

// 10 epochs of 8 learner-seconds on a gang of 4: 20 s; the deliver target after epoch 4, at 8 s.
TEST(ReplayTest, AProfiledGangTrainsItsEpochsAtItsLearnersRate) {
  SimResult r = SimulateProfiled(std::string(kHeader) + "gang,0,4,4,10,4,8\n", "fifo", 4);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_NEAR(r.jobs[0].jct_s, 20, 1.0);
  EXPECT_NEAR(r.jobs[0].time_to_deliver_s, 8, 1.0);
  EXPECT_NEAR(r.jobs[0].gpu_seconds, 80, 4.0);  // 4 learners × 20 s
}

// The same gang when 4 learners spend 16 learner-seconds on an epoch (1 learner 8): 40 s.
TEST(ReplayTest, AProfiledGangThatScalesSublinearlyTrainsAtItsMeasuredRate) {
  const std::string header =
      std::string(kHeader).insert(sizeof(kHeader) - 2, ",learner_seconds_by_learners");
  SimResult r = SimulateProfiled(header + "gang,0,4,4,10,4,8,1:8 4:16\n", "fifo", 4);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_NEAR(r.jobs[0].jct_s, 40, 1.0);
  EXPECT_NEAR(r.jobs[0].time_to_deliver_s, 16, 1.0);
}

// A profiled job's own start cost replaces the restart delay (0 here): the gang's 20 s and 3 s
// to start. An elastic job shrunk for a newcomer and grown back in place pays its resize cost
// each time, not another start.
TEST(ReplayTest, AProfiledJobPaysItsMeasuredStartAndResizeCosts) {
  const std::string header =
      std::string(kHeader).insert(sizeof(kHeader) - 2, ",start_seconds,resize_seconds");
  SimResult gang = SimulateProfiled(header + "gang,0,4,4,10,4,8,3,0.1\n", "fifo", 4);
  ASSERT_EQ(gang.jobs.size(), 1u);
  EXPECT_NEAR(gang.jobs[0].jct_s, 23, 1.0);
  SimResult cheap =
      SimulateProfiled(header + "e,0,1,4,10,4,8,3,0.1\nnewcomer,5,1,4,2,1,8,3,0.1\n", "goodput", 4);
  SimResult costly =
      SimulateProfiled(header + "e,0,1,4,10,4,8,3,3\nnewcomer,5,1,4,2,1,8,3,3\n", "goodput", 4);
  ASSERT_EQ(cheap.jobs.size(), 2u);
  ASSERT_EQ(costly.jobs.size(), 2u);
  EXPECT_GE(cheap.jobs[0].jct_s, 23);
  EXPECT_GE(cheap.jobs[0].restarts, 1);
  EXPECT_LT(cheap.jobs[0].jct_s, costly.jobs[0].jct_s - 2);
  // An empty field is the restart delay; a bad one names the line and the column.
  EXPECT_EQ(SimulateProfiled(header + "gang,0,4,4,10,4,8,,\n", "fifo", 4).jobs.size(), 1u);
  ExpectRefusedNamingTheLine(header, {"x,0,4,4,10,4,8,-1,0", "x,0,4,4,10,4,8,3,soon"});
}

// Alone on 4 nodes an elastic profiled job grows to its maximum under goodput (the resize pays:
// its 10 epochs left are worth far more than a second) and takes about as long as the gang.
TEST(ReplayTest, AnElasticProfiledJobGrowsIntoTheIdleClusterUnderGoodput) {
  SimResult r = SimulateProfiled(std::string(kHeader) + "elastic,0,1,4,10,4,8\n", "goodput", 4);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_LT(r.jobs[0].jct_s, 25);  // at 1 learner it would take 80 s
  EXPECT_GT(r.jobs[0].jct_s, 19);
}

// Two fixed gangs of 4 on 4 nodes run one after the other: the short second job (2 epochs, 4 s
// on 4 learners) waits for the first's 20 s. As elastic jobs under fair share they share the
// nodes, and the short one is done sooner (at 1 learner beside the first: 16 s).
TEST(ReplayTest, ElasticProfiledJobsShareTheClusterUnderFairShare) {
  SimResult fixed =
      SimulateProfiled(std::string(kHeader) + "a,0,4,4,10,4,8\nb,1,4,4,2,1,8\n", "fairshare", 4);
  SimResult elastic =
      SimulateProfiled(std::string(kHeader) + "a,0,1,4,10,4,8\nb,1,1,4,2,1,8\n", "fairshare", 4);
  ASSERT_EQ(fixed.jobs.size(), 2u);
  ASSERT_EQ(elastic.jobs.size(), 2u);
  EXPECT_NEAR(fixed.jobs[1].jct_s, 23, 2.0);  // a's 20 s less its 1 s head start, then 4 s
  EXPECT_LT(elastic.jobs[1].jct_s, fixed.jobs[1].jct_s - 4);
  EXPECT_LT(elastic.jobs[0].jct_s + elastic.jobs[1].jct_s,
            fixed.jobs[0].jct_s + fixed.jobs[1].jct_s);
}

TEST(ReplayTest, ABadProfiledRowIsRefusedNamingTheLine) {
  ExpectRefusedNamingTheLine(kHeader, {"x,0,0,4,10,4,8", "x,0,4,2,10,4,8", "x,0,1,4,0,4,8",
                                       "x,0,1,4,10,4,0", "x,0,1.5,4,10,4,8", "x,zero,1,4,10,4,8"});
  ExpectRefusedNamingTheLine(
      std::string(kHeader).insert(sizeof(kHeader) - 2, ",learner_seconds_by_learners"),
      {"x,0,1,4,10,4,8,1:8 1:9", "x,0,1,4,10,4,8,4:8 2:9", "x,0,1,4,10,4,8,0:8",
       "x,0,1,4,10,4,8,2:-1", "x,0,1,4,10,4,8,2=8"});
}

}  // namespace
}  // namespace weft::sim
