// Untrusted input through a real weftd: text that is not text, bodies over the limit, methods
// probed without a token, and a learner key too short to protect anything. Every answer is a 4xx
// that says what is wrong, never a 5xx.
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Each test starts weftd itself, with the flags it is about.
class HostileInputTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("hostile");
    o.start = false;
    return o;
  }
  // POSTs `body` as a manifest; the status and the parsed answer.
  std::pair<int, json> PostManifest(const std::string& body) {
    auto r = weftd_->Client().Post("/v1/jobs", body, "application/yaml");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // weftd allowing each tenant one stream, and a job that stays queued (its tenant's quota is
  // below one learner): its id, or "" after a failure.
  std::string StartWithOneStreamPlaceAndAQueuedJob() {
    StartWeftd({"--follow-streams-per-tenant", "1"});
    weftd_->ClientAs(weftd_->admin_token())
        .Patch("/v1/tenants/default", R"({"quota": {"cpus": 0.1}})", "application/json");
    auto [status, answer] =
        PostManifest("name: waits\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n");
    EXPECT_EQ(status, 201) << answer.dump(2);
    return status == 201 ? answer.value("id", "") : "";
  }
  // The problem the answer's details give for `field`, or "".
  static std::string ProblemOf(const json& answer, const std::string& field) {
    for (const auto& d : answer["error"].value("details", json::array())) {
      if (d.value("field", "") == field) return d.value("problem", "");
    }
    return "";
  }
};

TEST_F(HostileInputTest, TextThatIsNotTextIsA400NamingTheField) {
  StartWeftd();
  // Invalid UTF-8 in the name used to be a 500 from the JSON encoder.
  auto [status, answer] =
      PostManifest("name: ab\xff\xfe\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n");
  EXPECT_EQ(status, 400) << answer.dump(2);
  EXPECT_THAT(ProblemOf(answer, "name"), HasSubstr("invalid UTF-8 at byte 2"));
  // A NUL in the data set's name (in a JSON manifest) and an escape sequence in the description.
  std::tie(status, answer) = PostManifest(
      R"({"name": "x", "model": {"architecture": "mlp"}, "training": {"epochs": 1},
          "data": {"dataset": "fashion\u0000/etc"}, "description": "\u001b[2J"})");
  EXPECT_EQ(status, 400) << answer.dump(2);
  EXPECT_THAT(ProblemOf(answer, "data.dataset"), HasSubstr("control character (0x00) at byte 7"));
  EXPECT_THAT(ProblemOf(answer, "description"), HasSubstr("control character (0x1b) at byte 0"));
  // Nothing was stored.
  auto list = weftd_->Client().Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_TRUE(json::parse(list->body)["jobs"].empty());
}

TEST_F(HostileInputTest, ABodyOverTheLimitIsA413) {
  StartWeftd({"--max-request-bytes", "65536"});
  auto [status, answer] = PostManifest("name: x\ndescription: " + std::string(100000, 'a') + "\n");
  EXPECT_EQ(status, 413);
  EXPECT_THAT(answer["error"].value("message", ""), HasSubstr("over the 65536 bytes"));
  // The server is still there for the next request.
  auto ok = weftd_->Client().Get("/v1/jobs");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HostileInputTest, AMethodIsOnlyDiscussedWithACaller) {
  StartWeftd();
  auto anonymous = weftd_->ClientAs("").Put("/v1/jobs", "", "text/plain");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401) << "no token: nothing about which methods exist";
  EXPECT_FALSE(anonymous->has_header("Allow"));
  auto tenant = weftd_->Client().Put("/v1/jobs", "", "text/plain");
  ASSERT_TRUE(tenant);
  EXPECT_EQ(tenant->status, 405);
  EXPECT_EQ(tenant->get_header_value("Allow"), "GET, POST");
}

TEST_F(HostileInputTest, APostWithoutABodyGetsTheRoutesAnswer) {
  StartWeftd();
  // What `curl -X POST .../halt` sends: no Content-Length, no body. It used to wait for the read
  // timeout and get "400 request failed".
  std::string answer =
      testing::RawExchange(weftd_->port(),
                           "POST /v1/jobs/no-such-job/halt HTTP/1.1\r\nHost: weft\r\n"
                           "Authorization: Bearer " +
                               weftd_->token() + "\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(answer, ::testing::StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(answer, HasSubstr("no job 'no-such-job'"));
}

TEST_F(HostileInputTest, ATenantOverItsRequestRateGets429WithRetryAfter) {
  StartWeftd({"--tenant-requests-per-second", "0.5", "--tenant-burst", "3"});
  int refused = 0;
  std::string retry_after;
  for (int i = 0; i < 6; ++i) {
    auto r = weftd_->Client().Get("/v1/jobs");
    ASSERT_TRUE(r);
    if (r->status == 429) {
      ++refused;
      retry_after = r->get_header_value("Retry-After");
      EXPECT_THAT(r->body, HasSubstr("over its request rate"));
    } else {
      EXPECT_EQ(r->status, 200);
    }
  }
  // A burst of 3 passes; at 0.5/s at most one more token can have come back meanwhile.
  EXPECT_GE(refused, 2);
  EXPECT_THAT(retry_after, ::testing::AnyOf("1", "2"));
  // The admin is not limited, and the CLI waits out a 429 instead of failing.
  auto admin = weftd_->ClientAs(weftd_->admin_token()).Get("/v1/tenants");
  ASSERT_TRUE(admin);
  EXPECT_EQ(admin->status, 200);
  auto cli = weftd_->Cli({"list"});
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("retrying in"));
}

// Every regular file under `dir` whose contents hold `secret`.
std::vector<std::string> FilesHolding(const std::string& dir, const std::string& secret) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    if (s.find(secret) != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

std::string ReadProc(int64_t pid, const std::string& what) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + what, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST_F(HostileInputTest, NoSecretReachesALogAFileOrACommandLine) {
  StartWeftd();
  const std::string admin = weftd_->admin_token(), tenant = weftd_->token();
  ASSERT_GE(admin.size(), 32u);
  // A wrong token is not echoed either.
  auto wrong = weftd_->ClientAs("not-a-token-" + tenant).Get("/v1/jobs");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_THAT(wrong->body, Not(HasSubstr(tenant)));
  auto [status, answer] = PostManifest(
      "name: quiet\nmodel: {architecture: mlp, hidden_units: [32]}\n"
      "data: {dataset: fashion-mnist, train_samples: 2000, test_samples: 500}\n"
      "training: {epochs: 2, batch_size: 64, threads: 1}\nresources: {cpus: 1, memory_mb: 512}\n");
  ASSERT_EQ(status, 201) << answer.dump(2);
  const std::string id = answer.value("id", "");
  std::string credential, cmdline;
  for (int i = 0; i < 600 && credential.empty(); ++i) {
    for (int64_t pid : testing::LearnerPids(id)) {
      std::string env = ReadProc(pid, "environ");
      const std::string key = std::string("WEFT_JOB_CREDENTIAL=");
      if (auto at = env.find(key); at != std::string::npos) {
        credential = env.substr(at + key.size(), env.find('\0', at) - at - key.size());
        cmdline = ReadProc(pid, "cmdline");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(credential.empty()) << "no learner of " << id << " seen";
  EXPECT_THAT(cmdline, Not(HasSubstr(credential)));
  for (int i = 0; i < 600; ++i) {
    auto r = weftd_->Client().Get("/v1/jobs/" + id);
    if (r && json::parse(r->body).value("state", "") == "COMPLETED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // The secrets are in their own files and nowhere else: not in the store (digests only), the
  // logs, the specs, the checkpoints or weftd's output.
  EXPECT_THAT(FilesHolding(dir_, admin), ElementsAre(dir_ + "/data/admin.token"));
  EXPECT_THAT(FilesHolding(dir_, tenant), IsEmpty());
  EXPECT_THAT(FilesHolding(dir_, credential), IsEmpty());
  EXPECT_THAT(weftd_->log(), Not(HasSubstr(admin)));
  EXPECT_THAT(weftd_->log(), HasSubstr("created the admin token in"));
  // weftd dumps no core and its memory cannot be read through /proc by its user's processes.
  EXPECT_THAT(ReadProc(weftd_->pid(), "limits"),
              ::testing::ContainsRegex("Max core file size +0 +0"));
}

TEST_F(HostileInputTest, DeclaredResourcesAreEnforced) {
  // A code review's findings: memory_mb 64 with a 34 GiB model, threads 256 on 0.001 cpus, and
  // no limit on what a learner really uses.
  StartWeftd();
  auto [status, answer] = PostManifest(
      "name: huge\nmodel: {architecture: mlp, hidden_units: [65536, 65536, 65536]}\n"
      "training: {epochs: 1, threads: 256}\nresources: {cpus: 0.001, memory_mb: 64}\n");
  ASSERT_EQ(status, 400) << answer.dump(2);
  EXPECT_THAT(ProblemOf(answer, "resources.memory_mb"), HasSubstr("64 MiB cannot hold the mlp"));
  EXPECT_THAT(ProblemOf(answer, "training.threads"), HasSubstr("at most 1 threads"));
  // A small model fits its state in 64 MiB, but a learner holding all 60,000 training images
  // (188 MB as float32) does not: the executor kills it and the job fails saying so, at once.
  std::tie(status, answer) = PostManifest(
      "name: greedy\nmodel: {architecture: mlp, hidden_units: [32]}\n"
      "training: {epochs: 1, threads: 1}\nresources: {cpus: 1, memory_mb: 64}\n"
      "max_restarts: 3\n");
  ASSERT_EQ(status, 201) << answer.dump(2);
  const std::string id = answer.value("id", "");
  json job;
  for (int i = 0; i < 600; ++i) {
    auto r = weftd_->Client().Get("/v1/jobs/" + id);
    ASSERT_TRUE(r);
    job = json::parse(r->body);
    if (job.value("state", "") == "FAILED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(job.value("state", ""), "FAILED") << job.dump(2);
  EXPECT_THAT(job.value("reason", ""),
              ::testing::MatchesRegex("learner out of memory: [0-9.]+ [MG]iB used, 64 MiB "
                                      "requested \\(resources.memory_mb\\)"));
  EXPECT_EQ(job.value("attempt", -1), 1) << "an out-of-memory learner is not restarted";
}

TEST_F(HostileInputTest, AShortLearnerKeyStopsWeftdFromStarting) {
  std::filesystem::create_directories(dir_ + "/data");
  std::ofstream(dir_ + "/data/learner.key") << "";  // every credential would pass
  weftd_ = MakeWeftd("data");
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(),
              HasSubstr("learner.key holds 0 bytes; a learner key needs at least 32"));
}

TEST_F(HostileInputTest, PlainTextOffLoopbackNeedsInsecureAndIsNotReusedAfterwards) {
  weftd_ = MakeWeftd("data");
  weftd_->set_args({"--coordinator-listen", "0.0.0.0:0"});
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(), HasSubstr("--coordinator-listen 0.0.0.0:0 is not a loopback address"));
  weftd_ = MakeWeftd("data");
  weftd_->set_args({"--coordinator-listen", "0.0.0.0:0", "--insecure"});
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  weftd_->Stop();
  // Back on loopback: the address saved under 0.0.0.0 is not reused.
  weftd_ = MakeWeftd("data");
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  std::ifstream in(dir_ + "/data/coordinator.addr");
  std::string address;
  std::getline(in, address);
  EXPECT_THAT(address, ::testing::StartsWith("127.0.0.1:"));
}

// The coordinator's saved address is reused only if it is not the address the REST API is asked
// to listen on: a port freed by a killed weftd is the next free one, and may be given to --listen.
TEST_F(HostileInputTest, ASavedCoordinatorAddressNeverTakesTheRestApisPort) {
  weftd_ = MakeWeftd("data");
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  weftd_->Kill();
  auto saved = [&] {
    std::ifstream in(dir_ + "/data/coordinator.addr");
    std::string address;
    std::getline(in, address);
    return address;
  };
  const std::string before = saved();
  ASSERT_THAT(before, ::testing::StartsWith("127.0.0.1:"));
  weftd_->set_port(std::stoi(before.substr(before.find(':') + 1)));
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  EXPECT_EQ(weftd_->server(), before);
  EXPECT_NE(saved(), before);
  EXPECT_THAT(weftd_->log(), HasSubstr("is the address of --listen"));
}

// A learner whose log the disk refuses (every write to /dev/full fails with ENOSPC) loses only
// those lines: it trains, reports, checkpoints and delivers as if the log were written.
TEST_F(HostileInputTest, ALearnerWhoseLogTheDiskRefusesStillTrainsAndDelivers) {
  StartWeftd();
  auto admin = weftd_->ClientAs(weftd_->admin_token());
  // Held in the queue by a quota until its log is in place.
  admin.Patch("/v1/tenants/default", R"({"quota": {"cpus": 0.1}})", "application/json");
  auto [status, answer] = PostManifest(
      "name: nolog\nmodel: {architecture: mlp, hidden_units: [16]}\n"
      "data: {dataset: fashion-mnist, train_samples: 500, test_samples: 100}\n"
      "training: {epochs: 1, batch_size: 50, threads: 1}\n"
      "targets: {deliver: 0.1}\nresources: {cpus: 1}\n");
  ASSERT_EQ(status, 201) << answer.dump(2);
  const std::string id = answer.value("id", "");
  const std::string logs = dir_ + "/data/jobs/" + id + "/logs";
  std::filesystem::create_directories(logs);
  std::filesystem::create_symlink("/dev/full", logs + "/learner-0.log");
  auto raised = admin.Patch("/v1/tenants/default", R"({"quota": null})", "application/json");
  ASSERT_TRUE(raised);
  ASSERT_EQ(raised->status, 200) << raised->body;
  std::string state;
  json job;
  for (int i = 0; i < 900 && state != "COMPLETED" && state != "FAILED"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto r = weftd_->Client().Get("/v1/jobs/" + id);
    if (r && r->status == 200) job = json::parse(r->body);
    state = job.value("state", "");
  }
  ASSERT_EQ(state, "COMPLETED") << job.dump(2) << weftd_->log();
  for (const std::string kind : {"delivered", "final"}) {
    auto model = weftd_->Client().Get("/v1/jobs/" + id + "/model?which=" + kind);
    ASSERT_TRUE(model);
    EXPECT_EQ(model->status, 200) << kind;
    EXPECT_GT(model->body.size(), 1000u) << kind;
  }
  auto metrics = weftd_->Client().Get("/v1/jobs/" + id + "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("accuracy"));
  EXPECT_EQ(std::filesystem::read_symlink(logs + "/learner-0.log"), "/dev/full")
      << "the learner wrote its log where weft put it";
}

// Without --max-store-bytes the store may take a quarter of the disk's free space, so a tenant
// filling it leaves the rest of the disk to every tenant's checkpoints and logs.
TEST_F(HostileInputTest, ByDefaultTheStoreMayTakeAQuarterOfTheFreeDisk) {
  StartWeftd();
  std::smatch m;
  const std::string log = weftd_->log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(the store may grow to ([0-9.]+) MiB)")))
      << log;
  struct statvfs fs {};
  ASSERT_EQ(statvfs(dir_.c_str(), &fs), 0);
  const double quarter_mib = static_cast<double>(fs.f_bavail) * fs.f_frsize / 4 / (1 << 20);
  EXPECT_NEAR(std::stod(m[1].str()), std::max(256.0, quarter_mib), quarter_mib * 0.05 + 1);
}

TEST_F(HostileInputTest, AFullStoreAnswers507LosesNothingAndWeftdKeepsServing) {
  StartWeftd({"--max-store-bytes", "262144"});
  // A tenant quota nothing fits keeps the jobs queued.
  weftd_->ClientAs(weftd_->admin_token())
      .Patch("/v1/tenants/default", R"({"quota": {"cpus": 0.1}})", "application/json");
  const std::string manifest =
      "name: filler\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n"
      "description: " +
      std::string(3000, 'd') + "\n";
  std::vector<std::string> acknowledged;
  int status = 201;
  json answer;
  for (int i = 0; i < 1000 && status == 201; ++i) {
    std::tie(status, answer) = PostManifest(manifest);
    if (status == 201) acknowledged.push_back(answer.value("id", ""));
  }
  ASSERT_EQ(status, 507) << answer.dump(2);
  EXPECT_EQ(answer["error"].value("code", ""), "insufficient_storage");
  EXPECT_THAT(answer["error"].value("message", ""), HasSubstr("the store is full"));
  ASSERT_GT(acknowledged.size(), 3u);
  // Reads go on, and every acknowledged job is there, before and after a restart.
  for (int restart = 0; restart < 2; ++restart) {
    auto list = weftd_->Client().Get("/v1/jobs?limit=1000");
    ASSERT_TRUE(list);
    EXPECT_EQ(list->status, 200);
    EXPECT_EQ(json::parse(list->body)["jobs"].size(), acknowledged.size());
    weftd_->Stop();
    ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  }
}

TEST_F(HostileInputTest, LogStreamsAreCappedPerTenantAndTheirPlacesComeBack) {
  const std::string id = StartWithOneStreamPlaceAndAQueuedJob();
  ASSERT_FALSE(id.empty());
  const std::string logs = "/v1/jobs/" + id + "/logs?follow=true";
  // One stream, held open by a job that stays queued. Its headers arrive once weftd has given
  // it its place.
  std::atomic<bool> open{false};
  std::atomic<int> first_status{0};
  std::thread holder([&] {
    auto c = weftd_->Client();
    c.set_read_timeout(60, 0);
    auto r = c.Get(
        logs,
        [&](const httplib::Response&) {
          open = true;
          return true;
        },
        [](const char*, size_t) { return true; });
    first_status = r ? r->status : -1;
  });
  for (int i = 0; i < 100 && !open; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto second = weftd_->Client().Get(logs);
  const bool refused = second && second->status == 429;
  EXPECT_TRUE(refused) << (second ? second->body : "no answer");
  if (refused) {
    EXPECT_EQ(second->get_header_value("Retry-After"), "5");
    EXPECT_THAT(
        second->body,
        HasSubstr("as many streams open (followed logs and event streams) as weftd allows"));
  }
  // The admin is not counted; halting the job ends the stream and gives its place back.
  auto admin = weftd_->ClientAs(weftd_->admin_token()).Get("/v1/jobs?limit=1");
  EXPECT_EQ(admin->status, 200);
  weftd_->Client().Post("/v1/jobs/" + id + "/halt", "", "application/json");
  holder.join();
  EXPECT_EQ(first_status, 200);
  auto again = weftd_->Client().Get(logs);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
}

// A stream whose client leaves gives its place back within seconds, not when the job ends or
// the next keep-alive (15 s) fails to go out: an event stream, and a followed log of a queued
// job, which has nothing to write.
TEST_F(HostileInputTest, AStreamItsClientLeftGivesItsPlaceBackWithinSeconds) {
  const std::string id = StartWithOneStreamPlaceAndAQueuedJob();
  ASSERT_FALSE(id.empty());
  // Opens `path` as a stream and leaves once its headers arrived; the status they had.
  auto open_and_leave = [&](const std::string& path) {
    int seen = 0;
    auto c = weftd_->Client();
    c.Get(
        path,
        [&](const httplib::Response& r) {
          seen = r.status;
          return false;  // the client closes the connection
        },
        [](const char*, size_t) { return true; });
    return seen;
  };
  // Opens `path` as soon as a place is free, within 10 s (five of weftd's keep-alives); the
  // last status.
  auto open_within = [&](const std::string& path) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    while ((status = open_and_leave(path)) == 429 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return status;
  };
  const std::string queued_log = "/v1/jobs/" + id + "/logs?follow=true";
  for (const std::string& path : {std::string("/v1/events"), queued_log}) {
    SCOPED_TRACE(path);
    ASSERT_EQ(open_within(path), 200);
    // The only place is held by the stream just left, until weftd notices.
    EXPECT_EQ(open_within(path), 200);
  }
}

}  // namespace
}  // namespace weft
