// The learner contract both sides read: what the executor writes into a learner's environment
// is what the learner reads back, under the documented names.
#include "job/learner_contract.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "job/layout.h"

namespace weft {
namespace {

using ::testing::HasSubstr;

LearnerLaunch Gang() {
  LearnerLaunch l;
  l.job_id = "job-abc";
  l.attempt = 3;
  l.rank = 1;
  l.world_size = 2;
  l.node = "n1";
  l.spec_path = "/d/jobs/job-abc/spec.json";
  l.data_dir = "/data";
  l.result_dir = "/d/jobs/job-abc/results";
  l.checkpoint_dir = "/d/jobs/job-abc/checkpoints";
  l.log_dir = "/d/jobs/job-abc/logs";
  l.coordinator_address = "127.0.0.1:5000";
  l.rendezvous_host = "10.0.0.1";
  l.rendezvous_port = 29400;
  l.threads = 2;
  l.credential = "cred";
  l.ps_credential = "ps-cred";
  l.ps_tls_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  l.ps_tls_key = "-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\n";
  return l;
}

std::map<std::string, std::string> AsMap(const LearnerLaunch& l) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : LearnerEnvironment(l)) env[k] = v;
  return env;
}

absl::StatusOr<LearnerLaunch> ReadBack(const std::map<std::string, std::string>& env) {
  return LearnerLaunchFromEnvironment([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LearnerContractTest, UsesTheNamesFfdlAndTorchrunUsersKnow) {
  auto env = AsMap(Gang());
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["LEARNER_ID"], "2");  // FfDL counts from 1
  EXPECT_EQ(env["NUM_LEARNERS"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29400");
  EXPECT_EQ(env["DATA_DIR"], "/data");
  EXPECT_EQ(env["RESULT_DIR"], "/d/jobs/job-abc/results");
  EXPECT_EQ(env["CHECKPOINT_DIR"], "/d/jobs/job-abc/checkpoints");
  EXPECT_EQ(env["LOG_DIR"], "/d/jobs/job-abc/logs");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "2");
  EXPECT_EQ(env["WEFT_ATTEMPT"], "3");
  EXPECT_EQ(env.count("WEFT_TOKEN"), 0u);
  for (const auto& [name, value] : env) {
    EXPECT_NE(std::find(LearnerEnvironmentNames().begin(), LearnerEnvironmentNames().end(), name),
              LearnerEnvironmentNames().end())
        << name << " is set but not listed, so a learner could inherit a stale one from weftd";
  }
}

TEST(LearnerContractTest, WhatTheExecutorWritesTheLearnerReadsBack) {
  LearnerLaunch sent = Gang();
  auto got = ReadBack(AsMap(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job_id, sent.job_id);
  EXPECT_EQ(got->attempt, sent.attempt);
  EXPECT_EQ(got->rank, sent.rank);
  EXPECT_EQ(got->world_size, sent.world_size);
  EXPECT_EQ(got->node, sent.node);
  EXPECT_EQ(got->spec_path, sent.spec_path);
  EXPECT_EQ(got->data_dir, sent.data_dir);
  EXPECT_EQ(got->result_dir, sent.result_dir);
  EXPECT_EQ(got->checkpoint_dir, sent.checkpoint_dir);
  EXPECT_EQ(got->log_dir, sent.log_dir);
  EXPECT_EQ(got->coordinator_address, sent.coordinator_address);
  EXPECT_EQ(got->rendezvous_host, sent.rendezvous_host);
  EXPECT_EQ(got->rendezvous_port, sent.rendezvous_port);
  EXPECT_EQ(got->threads, sent.threads);
  EXPECT_EQ(got->credential, sent.credential);
  EXPECT_EQ(got->ps_credential, sent.ps_credential);
  EXPECT_EQ(got->ps_tls_cert, sent.ps_tls_cert);  // newlines and all
  EXPECT_EQ(got->ps_tls_key, sent.ps_tls_key);
}

TEST(LearnerContractTest, ALearnerJoiningARunningElasticJobKeepsItsIdAndGetsItsRankThere) {
  LearnerLaunch sent = Gang();
  sent.rank = 4;  // its id: ids 0..3 were handed out before
  sent.world_size = 3;
  sent.generation = 5;
  sent.generation_rank = 2;
  auto env = AsMap(sent);
  EXPECT_EQ(env["WEFT_GENERATION"], "5");
  EXPECT_EQ(env["WEFT_GENERATION_RANK"], "2");
  auto got = ReadBack(env);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rank, 4);
  EXPECT_EQ(got->generation, 5);
  EXPECT_EQ(got->generation_rank, 2);
  env["WEFT_GENERATION_RANK"] = "3";
  EXPECT_THAT(std::string(ReadBack(env).status().message()),
              HasSubstr("WEFT_GENERATION_RANK 3 is not in [0, WORLD_SIZE 3)"));
  // A learner started with its attempt has neither.
  EXPECT_EQ(AsMap(Gang()).count("WEFT_GENERATION"), 0u);
  EXPECT_EQ(ReadBack(AsMap(Gang()))->generation, 1);
}

TEST(LearnerContractTest, AShardedParameterServerJobsLearnersAreToldTheServersInShardOrder) {
  LearnerLaunch sent = Gang();
  sent.ps_servers = {"127.0.0.1:4100", "127.0.0.2:4101"};
  auto env = AsMap(sent);
  EXPECT_EQ(env["WEFT_PS_SERVERS"], "127.0.0.1:4100,127.0.0.2:4101");
  EXPECT_EQ(env.count("WEFT_PS_SERVER"), 0u) << "a learner, not a server";
  auto got = ReadBack(env);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ps_servers, sent.ps_servers);
  sent.ps_server = 1;
  EXPECT_EQ(AsMap(sent)["WEFT_PS_SERVER"], "1");
  env["WEFT_PS_SERVERS"] = "127.0.0.1:4100,";
  EXPECT_THAT(std::string(ReadBack(env).status().message()), HasSubstr("WEFT_PS_SERVERS"));
  EXPECT_TRUE(ReadBack(AsMap(Gang()))->ps_servers.empty());
}

TEST(LearnerContractTest, AGangThatTrainsAsOneLearnerTellsEveryRankItsSize) {
  LearnerLaunch sent = Gang();
  sent.learners_as_one = 2;
  auto env = AsMap(sent);
  EXPECT_EQ(env["WEFT_LEARNERS_AS_ONE"], "2");
  auto got = ReadBack(env);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->learners_as_one, 2);
  EXPECT_EQ(got->world_size, 2) << "the gang's size stays the world size weftd checks";
  env["WEFT_LEARNERS_AS_ONE"] = "3";
  EXPECT_THAT(std::string(ReadBack(env).status().message()),
              HasSubstr("WEFT_LEARNERS_AS_ONE must be 1 or WORLD_SIZE 2, got 3"));
  EXPECT_EQ(AsMap(Gang()).count("WEFT_LEARNERS_AS_ONE"), 0u);
  EXPECT_EQ(ReadBack(AsMap(Gang()))->learners_as_one, 1);
}

TEST(LearnerContractTest, ALearnersGpusGoAndComeBackAsWeftGpusAndAreNeverInherited) {
  LearnerLaunch sent = Gang();
  sent.gpus = {1, 3};
  std::map<std::string, std::string> env = AsMap(sent);
  EXPECT_EQ(env["WEFT_GPUS"], "1,3");
  auto got = ReadBack(env);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->gpus, (std::vector<int>{1, 3}));
  EXPECT_FALSE(AsMap(Gang()).count("WEFT_GPUS")) << "unset without GPUs";
  for (const char* bad : {"1,x", "-1", "1,,2", "4096"}) {
    env["WEFT_GPUS"] = bad;
    auto refused = ReadBack(env);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(std::string(refused.status().message()), ::testing::HasSubstr("WEFT_GPUS"));
  }
  // weftd's own CUDA_VISIBLE_DEVICES is not a learner's to inherit.
  const auto& names = LearnerEnvironmentNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "CUDA_VISIBLE_DEVICES"), names.end());
}

TEST(LearnerContractTest, AMissingOrMalformedVariableIsNamed) {
  auto env = AsMap(Gang());
  env.erase("WEFT_JOB_ID");
  EXPECT_THAT(std::string(ReadBack(env).status().message()), HasSubstr("WEFT_JOB_ID"));
  env = AsMap(Gang());
  env["WORLD_SIZE"] = "two";
  EXPECT_THAT(std::string(ReadBack(env).status().message()), HasSubstr("WORLD_SIZE"));
  env = AsMap(Gang());
  env["RANK"] = "2";
  EXPECT_THAT(std::string(ReadBack(env).status().message()), HasSubstr("RANK 2"));
  env = AsMap(Gang());
  env.erase("MASTER_PORT");
  EXPECT_THAT(std::string(ReadBack(env).status().message()), HasSubstr("MASTER_PORT"));
}

TEST(LearnerContractTest, OneLearnerNeedsNoRendezvous) {
  LearnerLaunch one = Gang();
  one.rank = 0;
  one.world_size = 1;
  one.rendezvous_host.clear();
  auto env = AsMap(one);
  EXPECT_EQ(env.count("MASTER_ADDR"), 0u);
  auto got = ReadBack(env);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->world_size, 1);
  EXPECT_TRUE(got->rendezvous_host.empty());
}

TEST(LayoutTest, PathsAreDerivedFromTheDataDirectoryAndTheJobId) {
  JobLayout layout("/var/weft");
  EXPECT_EQ(layout.SpecPath("job-1"), "/var/weft/jobs/job-1/spec.json");
  EXPECT_EQ(layout.LogPath("job-1", 3), "/var/weft/jobs/job-1/logs/learner-3.log");
  EXPECT_EQ(CheckpointPath(layout.CheckpointDir("job-1"), 42),
            "/var/weft/jobs/job-1/checkpoints/ckpt-0000000042.pt");
  EXPECT_EQ(ModelPath(layout.ResultDir("job-1"), kDeliveredModel),
            "/var/weft/jobs/job-1/results/delivered/model.pt");
  EXPECT_EQ(ModelCardPath(layout.ResultDir("job-1"), kFinalModel),
            "/var/weft/jobs/job-1/results/final/model-card.json");
  EXPECT_TRUE(IsModelKind("final"));
  EXPECT_FALSE(IsModelKind("../final"));
}

}  // namespace
}  // namespace weft
