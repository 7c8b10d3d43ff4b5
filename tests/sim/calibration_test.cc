// weft-sim against the Pollux OSDI'21 artifact's committed results: Tiresias and Optimus+Oracle
// are deterministic there, so per-workload means must be within ±5 % and most per-job JCTs equal.
#include <cmath>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/policies.h"
#include "sim/simulator.h"
#include "sim/traces.h"
#include "sim/workload.h"

namespace weft::sim {
namespace {

struct Case {
  std::string policy;
  std::string load;
  double min_exact;  // fraction of jobs whose JCT must equal the artifact's exactly
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.policy << " at " << c.load << "x"; }

class CalibrationTest : public ::testing::TestWithParam<Case> {};

TEST_P(CalibrationTest, MatchesPublishedJcts) {
  WEFT_REQUIRE_TRACES();
  const Case& c = GetParam();
  const std::string root = weft::testing::TracesDir() + "/pollux";
  std::ifstream in(root + "/results/" + c.policy + "-" + c.load + ".json");
  ASSERT_TRUE(in) << "missing published results";
  nlohmann::json published = nlohmann::json::parse(in);
  const std::string dir = root + (c.load == "1.0" ? "/workloads" : "/workloads-" + c.load);
  auto files = WorkloadFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 8u);
  AppCatalog apps(root + "/app-traces");
  int jobs = 0, exact = 0;
  double sum_means = 0;
  for (const std::string& f : *files) {
    auto w = ReadWorkload(f);
    ASSERT_TRUE(w.ok()) << w.status();
    auto policy = scheduler::MakePolicy(c.policy);
    ASSERT_TRUE(policy.ok());
    auto r = Simulate(*w, apps, **policy, JobModeFor(c.policy), SimOptions{});
    ASSERT_TRUE(r.ok()) << r.status();
    const auto& pub = published["jcts"][w->name];
    ASSERT_EQ(pub.size(), r->jobs.size()) << w->name;
    for (const JobResult& j : r->jobs) {
      ++jobs;
      if (j.jct_s == pub[j.name].get<double>()) ++exact;
    }
    double want = published["avgs"][w->name].get<double>();
    EXPECT_NEAR(r->avg_jct_s, want, 0.05 * want) << w->name;
    sum_means += r->avg_jct_s;
  }
  double mean = sum_means / 8;
  double want = published["mean"].get<double>();
  std::cout << c.policy << " " << c.load << "x: mean JCT " << mean << " s, published " << want
            << " s (ratio " << mean / want << "); per-job JCTs equal: " << exact << "/" << jobs
            << "\n";
  EXPECT_NEAR(mean, want, 0.05 * want);
  EXPECT_GE(exact, c.min_exact * jobs);
}

INSTANTIATE_TEST_SUITE_P(Artifact, CalibrationTest,
                         ::testing::Values(Case{"tiresias", "1.0", 1.0},
                                           Case{"tiresias", "0.5", 1.0},
                                           Case{"tiresias", "2.0", 1.0},
                                           Case{"optimus", "1.0", 0.95},
                                           Case{"optimus", "0.5", 0.90}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string load = i.param.load;
                           load[1] = '_';
                           return i.param.policy + "_" + load;
                         });

}  // namespace
}  // namespace weft::sim
