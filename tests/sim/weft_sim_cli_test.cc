// weft-sim as a user runs it: the binary, its exit codes, its last JSON line and its files.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/traces.h"

namespace {

struct SimRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

SimRun Sim(const std::string& args) {
  std::string cmd = std::string(WEFT_BIN_DIR) + "/weft-sim " + args + " 2>&1";
  SimRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string LastLine(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.find_last_of('\n') + 1);
}

TEST(WeftSimCliTest, UnknownPolicyIsAUsageError) {
  SimRun r = Sim("--policy lottery --workloads /nonexistent");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown policy 'lottery'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tiresias"), std::string::npos) << r.out;
}

TEST(WeftSimCliTest, MissingWorkloadsAndMissingTracesAreNamed) {
  SimRun r = Sim("--policy fifo --workloads /nonexistent/dir");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--workloads: /nonexistent/dir"), std::string::npos) << r.out;
  if (!weft::testing::HaveTraces()) GTEST_SKIP() << "no traces";
  r = Sim("--policy fifo --workloads " + weft::testing::TracesDir() + "/pollux/workloads-0.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--app-traces DIR is required"), std::string::npos) << r.out;
}

TEST(WeftSimCliTest, DirectoryRunPrintsTableJsonAndWritesFiles) {
  WEFT_REQUIRE_TRACES();
  const std::string root = weft::testing::TracesDir() + "/pollux";
  char tmpl[] = "/tmp/weft-sim-cli-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string out = tmpl;
  SimRun r = Sim("--policy tiresias --workloads " + root + "/workloads-0.5 --app-traces " + root +
                 "/app-traces --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("avg JCT s"), std::string::npos) << r.out;  // the table
  nlohmann::json last = nlohmann::json::parse(LastLine(r.out));
  EXPECT_EQ(last["policy"], "tiresias");
  ASSERT_EQ(last["avg_jct"].size(), 8u);
  double sum = 0;
  for (auto& [name, v] : last["avg_jct"].items()) sum += v.get<double>();
  EXPECT_DOUBLE_EQ(last["mean_jct"].get<double>(), sum / 8);
  EXPECT_NEAR(last["mean_jct"].get<double>(), 2091.5, 0.1);  // the artifact's tiresias-0.5

  std::ifstream csv(out + "/tiresias-workload-1.csv");
  ASSERT_TRUE(csv);
  std::string header, row;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "name,app,replicas,submit_s,start_s,completion_s,jct_s,restarts,gpu_seconds,deliver_s,"
            "time_to_deliver_s");
  int rows = 0;
  while (std::getline(csv, row)) ++rows;
  EXPECT_EQ(rows, 80);
  std::ifstream summary(out + "/tiresias-summary.json");
  ASSERT_TRUE(summary);
  nlohmann::json s = nlohmann::json::parse(summary);
  EXPECT_EQ(s["workloads"].size(), 8u);
  EXPECT_GT(s["workloads"][0]["gpu_utilisation"].get<double>(), 0);
  std::system(("rm -rf " + out).c_str());
}

TEST(WeftSimCliTest, PhillyLogWithATraceSizedCluster) {
  WEFT_REQUIRE_TRACES();
  // The first 2,000 Philly jobs, written as a log of our own.
  std::ifstream in(weft::testing::TracesDir() + "/pollux/philly.csv");
  ASSERT_TRUE(in);
  char tmpl[] = "/tmp/weft-philly-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/philly-head.csv";
  {
    std::ofstream out(path);
    std::string line;
    for (int i = 0; i <= 2000 && std::getline(in, line); ++i) out << line << "\n";
  }
  SimRun r = Sim("--policy tiresias --workloads " + path + " --nodes 0 --gpus-per-node 8");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json last = nlohmann::json::parse(LastLine(r.out));
  EXPECT_GT(last["mean_jct"].get<double>(), 0);
  EXPECT_NE(r.out.find("philly-head: 2000 jobs"), std::string::npos) << r.out;
  std::system((std::string("rm -rf ") + tmpl).c_str());
}

// Elastic jobs under weft's fair-share policy: started at 1 GPU, grown into idle GPUs and shrunk
// back for waiting jobs. The simulation is deterministic, so the comparison is exact.
TEST(WeftSimCliTest, ElasticJobsUnderFairShareFinishSoonerThanRigidGangs) {
  WEFT_REQUIRE_TRACES();
  const std::string root = weft::testing::TracesDir() + "/pollux";
  const std::string args = "--policy fairshare -q --workloads " + root +
                           "/workloads/workload-2.csv --app-traces " + root + "/app-traces";
  SimRun rigid = Sim(args);
  SimRun elastic = Sim(args + " --elastic");
  ASSERT_EQ(rigid.exit_code, 0) << rigid.out;
  ASSERT_EQ(elastic.exit_code, 0) << elastic.out;
  const double rigid_jct = nlohmann::json::parse(LastLine(rigid.out))["mean_jct"];
  const double elastic_jct = nlohmann::json::parse(LastLine(elastic.out))["mean_jct"];
  std::cout << "workload-2, fairshare: mean JCT " << rigid_jct << " s rigid, " << elastic_jct
            << " s elastic\n";
  EXPECT_LT(elastic_jct, rigid_jct / 2);
}

}  // namespace
