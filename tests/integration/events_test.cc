// The server-sent-events streams through a real weftd and a real learner: a job's stream from its
// snapshot to its end, the tenant-wide stream and its replay after Last-Event-ID, and tenant
// isolation.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "common/sse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSmoke = std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-mlp-smoke.yaml";

struct Read {
  int status = 0;
  std::vector<SseEvent> events;
  bool ended_by_server = false;  // the stream ended without the reader stopping it
  std::string content_type;
};

class EventsTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override { return testing::WeftdTestOptions("events"); }

  // Reads `path` as `token` until `stop` says so, the server ends it, or `timeout_s` of silence.
  Read Stream(const std::string& token, const std::string& path,
              const std::function<bool(const SseEvent&)>& stop, int timeout_s,
              const std::string& last_event_id = "") {
    Read out;
    httplib::Client c = weftd_->ClientAs(token);
    c.set_read_timeout(timeout_s, 0);
    httplib::Headers headers;
    if (!last_event_id.empty()) headers.emplace("Last-Event-ID", last_event_id);
    SseParser parser;
    bool stopped = false;
    auto r = c.Get(
        path, headers,
        [&](const httplib::Response& res) {
          out.status = res.status;
          out.content_type = res.get_header_value("Content-Type");
          return true;
        },
        [&](const char* data, size_t n) {
          parser.Feed(std::string_view(data, n), [&](const SseEvent& e) {
            if (stopped) return;
            out.events.push_back(e);
            stopped = stop(e);
          });
          return !stopped;
        });
    out.ended_by_server = r && !stopped;
    return out;
  }
};

TEST_F(EventsTest, AJobsStreamCarriesItsLifeFromSnapshotToCompletionAndOnlyToItsTenant) {
  const std::string other = NewTenant("other");
  std::ifstream in(kSmoke);
  std::string manifest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto submitted = weftd_->Client().Post("/v1/jobs", manifest, "application/yaml");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 201) << submitted->body;
  const std::string id = json::parse(submitted->body)["id"];
  const std::string path = "/v1/jobs/" + id + "/events";

  // Another tenant's job is 404, as everywhere.
  EXPECT_EQ(weftd_->ClientAs(other).Get(path)->status, 404);

  Read job = Stream(
      weftd_->token(), path, [](const SseEvent&) { return false; }, 240);
  ASSERT_EQ(job.status, 200);
  EXPECT_EQ(job.content_type, "text/event-stream");
  EXPECT_TRUE(job.ended_by_server) << "weftd ends a job's stream once the job settles";
  ASSERT_FALSE(job.events.empty());
  // The snapshot first, then what happened after it, ids rising.
  EXPECT_EQ(job.events[0].event, "job");
  EXPECT_EQ(json::parse(job.events[0].data)["id"], id);
  std::vector<std::string> states;
  int64_t last_id = -1, last_step = -1, progress = 0;
  bool evaluated = false;
  std::vector<std::string> models;
  for (const SseEvent& e : job.events) {
    // RUN-SEQ: one run of weftd, rising numbers.
    ASSERT_EQ(e.id.substr(0, e.id.find('-')),
              job.events[0].id.substr(0, job.events[0].id.find('-')));
    const int64_t seq = std::stoll(e.id.substr(e.id.find('-') + 1));
    EXPECT_GT(seq, last_id) << e.event << " " << e.data;
    last_id = seq;
    json d = json::parse(e.data);
    if (e.event != "job") {
      EXPECT_EQ(d["job"], id);
    }
    if (e.event == "state") states.push_back(d["state"]);
    if (e.event == "model") models.push_back(d["model"]["kind"]);
    if (e.event == "progress") {
      ++progress;
      EXPECT_GE(d["progress"]["step"].get<int64_t>(), last_step);
      last_step = d["progress"]["step"];
      for (const json& p : d["metrics"]) evaluated |= p.contains("test_accuracy");
    }
  }
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), "COMPLETED");
  EXPECT_EQ(job.events.back().event, "state");
  EXPECT_THAT(states, ::testing::Contains("RUNNING"));
  EXPECT_THAT(states, ::testing::Contains("DELIVERED"));
  EXPECT_THAT(models, ElementsAre("delivered", "final"));
  EXPECT_GE(progress, 2);
  EXPECT_TRUE(evaluated) << "an evaluation point arrives in a progress event";

  // The tenant's stream replays what weftd still holds after Last-Event-ID RUN-0: this job's
  // life up to COMPLETED. The other tenant's sees nothing of it.
  const std::string first = job.events[0].id.substr(0, job.events[0].id.find('-')) + "-0";
  Read mine = Stream(
      weftd_->token(), "/v1/events",
      [&](const SseEvent& e) {
        return e.event == "state" && json::parse(e.data)["state"] == "COMPLETED";
      },
      20, first);
  ASSERT_EQ(mine.status, 200);
  std::vector<std::string> replayed;
  for (const SseEvent& e : mine.events) {
    if (e.event == "state") replayed.push_back(json::parse(e.data)["state"]);
  }
  // The snapshot's history and the stream's transitions after it are the whole life, each once.
  std::vector<std::string> life;
  const json snapshot = json::parse(job.events[0].data);
  for (const json& h : snapshot["history"]) life.push_back(h["to"]);
  life.insert(life.end(), states.begin(), states.end());
  EXPECT_EQ(replayed, life) << job.events[0].data;
  EXPECT_EQ(replayed.front(), "QUEUED");
  Read theirs = Stream(
      other, "/v1/events", [](const SseEvent&) { return true; }, 3, first);
  EXPECT_EQ(theirs.status, 200);
  EXPECT_TRUE(theirs.events.empty()) << theirs.events[0].data;

  // A settled job's stream is its snapshot and the end.
  Read again = Stream(
      weftd_->token(), path, [](const SseEvent&) { return false; }, 10, job.events.back().id);
  EXPECT_TRUE(again.ended_by_server);
  ASSERT_EQ(again.events.size(), 1u);
  EXPECT_EQ(again.events[0].event, "job");
  EXPECT_EQ(json::parse(again.events[0].data)["state"], "COMPLETED");
}

TEST_F(EventsTest, AStreamAfterAnEventOfAnotherRunIsToldToReadAgain) {
  // weftd restarted since the client's last event (an id of another run, even with a small
  // number), or the id is not weftd's: it says so rather than carry on from the wrong place.
  for (const std::string& id : {std::string("1-0"), std::string("999999"), std::string("x")}) {
    Read r = Stream(
        weftd_->token(), "/v1/events", [](const SseEvent&) { return true; }, 5, id);
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.events.size(), 1u) << id;
    EXPECT_EQ(r.events[0].event, "reset");
    EXPECT_THAT(r.events[0].data, HasSubstr("read the jobs again"));
  }
  // Restarted: the same numbers are not taken as this run's.
  std::ifstream in(kSmoke);
  std::string manifest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto submitted = weftd_->Client().Post("/v1/jobs", manifest, "application/yaml");
  ASSERT_EQ(submitted->status, 201);
  const std::string job = json::parse(submitted->body)["id"];
  Read before = Stream(
      weftd_->token(), "/v1/jobs/" + job + "/events", [](const SseEvent&) { return true; }, 10);
  ASSERT_FALSE(before.events.empty());
  weftd_->Stop();
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  Read after = Stream(
      weftd_->token(), "/v1/events", [](const SseEvent&) { return true; }, 5, before.events[0].id);
  ASSERT_FALSE(after.events.empty());
  EXPECT_EQ(after.events[0].event, "reset");
}

}  // namespace
}  // namespace weft
