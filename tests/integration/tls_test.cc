// weftd with a certificate: the REST API speaks HTTPS, the coordinator TLS, and a job trains
// through both (its learner verifies the coordinator by the certificate weftd hands it). A
// client that does not trust the certificate is refused and told what to do; plain HTTP gets
// no answer; with TLS weftd may listen off loopback without --insecure; a scale-out
// parameter-server job's weft-ps shards speak TLS to its learners too.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;

// weftd serves https with a self-signed certificate (tls_cert_, tls_key_); each test starts it.
class TlsTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("tls");
    o.tls = true;
    o.start = false;
    return o;
  }
};

TEST_F(TlsTest, TheApiAndTheCoordinatorSpeakTlsAndAJobTrainsThroughThem) {
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  EXPECT_THAT(weftd_->log(), HasSubstr("listening on https://"));
  // Plain HTTP on the port gets no HTTP answer.
  EXPECT_THAT(testing::RawExchange(weftd_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
              Not(HasSubstr("200 OK")));
  // A client that does not trust the certificate is refused, and told what to do.
  auto untrusted = RunCommand({std::string(WEFT_BIN_DIR) + "/weft", "--server", weftd_->url(),
                               "--token", weftd_->token(), "list"});
  EXPECT_EQ(untrusted.exit_code, 2) << untrusted.output;
  EXPECT_THAT(untrusted.output, HasSubstr("--ca-cert"));

  // The CLI trusts it (WeftdProcess passes --ca-cert); the learner reports over TLS.
  auto submit = weftd_->Cli(
      {"submit", std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-mlp-smoke.yaml",
       "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output << weftd_->log();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(submit.output, m, std::regex("job (job-[0-9a-z]+-[0-9a-z]+)")));
  auto job = weftd_->Client().Get("/v1/jobs/" + m[1].str());
  ASSERT_TRUE(job);
  json j = json::parse(job->body);
  EXPECT_EQ(j.value("state", ""), "COMPLETED") << j.dump(2);
  EXPECT_TRUE(j["models"].contains("final")) << j.dump(2);
  EXPECT_THAT(weftd_->log(), HasSubstr("over TLS"));
}

TEST_F(TlsTest, WithACertificateWeftdMayListenOffLoopbackWithoutInsecure) {
  weftd_->set_args({"--coordinator-listen", "0.0.0.0:0"});
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  weftd_->Stop();
  // Without one it refuses, naming the way out.
  weftd_->set_tls("", "");
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(), HasSubstr("give weftd a certificate (--tls-cert, --tls-key)"));
}

TEST_F(TlsTest, ACertificateThatDoesNotLoadStopsWeftdWithTheReason) {
  std::ofstream(dir_ + "/bad.pem") << "not a certificate\n";
  weftd_->set_tls(dir_ + "/bad.pem", tls_key_);
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(), HasSubstr("do not load"));
  weftd_->set_tls(tls_cert_, "");
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(), HasSubstr("--tls-cert and --tls-key go together"));
}

// Two learners and two weft-ps shards on two logical nodes, weftd with a certificate: each shard
// serves TLS with its attempt's identity, the learners pin it, and the job trains through them.
class TlsParameterServerTest : public TlsTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o = TlsTest::Options();
    o.fashion_mnist = true;
    o.start = true;
    o.nodes =
        "nodes:\n  - {name: node-a, cpus: 2, memory_mb: 8192}\n"
        "  - {name: node-b, cpus: 2, memory_mb: 8192}\n";
    return o;
  }
};

TEST_F(TlsParameterServerTest, TheShardsSpeakTlsAndTheJobTrainsThroughThem) {
  const std::string id = Submit(
      "sharded",
      "model: {architecture: mlp, hidden_units: [128]}\n"
      "data: {dataset: fashion-mnist, train_samples: 12000, test_samples: 2000}\n"
      "training: {epochs: 2, batch_size: 64, threads: 1, seed: 3, sync: ps, ps: {servers: 2}}\n"
      "resources: {learners: 2, cpus: 1, placement: spread}\n");
  json done = WaitFor(id, {"COMPLETED", "FAILED"}, 600);
  ASSERT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2) << weftd_->log();
  EXPECT_GT(done["models"]["final"].value("test_accuracy", 0.0), 0.75);
  for (const char* shard : {"0", "1"}) {
    const std::string log = weftd_->Cli({"logs", id, "--server", shard}).output;
    EXPECT_THAT(log, ::testing::ContainsRegex("listening on port [0-9]+ over TLS")) << log;
    EXPECT_THAT(log, HasSubstr("gradients applied")) << log;
  }
}

}  // namespace
}  // namespace weft
