// The API document is the contract: one tenant's whole journey and the admin's, through every
// route weftd serves, with every answer checked against docs/openapi.yaml (route, method,
// status and JSON schema). A field the server renames or a status it starts answering fails
// here until the document says so too.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/openapi_check.h"
#include "integration/weftd_test.h"

namespace weft {
namespace {

using json = nlohmann::json;

class ApiContractTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("contract");
    o.args = {"--webhook-allow", "127.0.0.1:9"};
    return o;
  }

  // Sends the request as `token`, checks the answer against the document and returns it.
  json Call(const std::string& token, const std::string& method, const std::string& path,
            const std::string& body = "", int expect = 200) {
    auto c = weftd_->ClientAs(token);
    httplib::Result r = method == "GET"      ? c.Get(path)
                        : method == "POST"   ? c.Post(path, body, "application/yaml")
                        : method == "PATCH"  ? c.Patch(path, body, "application/json")
                        : method == "DELETE" ? c.Delete(path)
                                             : c.Put(path, body, "text/plain");
    EXPECT_TRUE(r) << method << " " << path;
    if (!r) return json();
    EXPECT_EQ(r->status, expect) << method << " " << path << ": " << r->body;
    for (const std::string& problem :
         doc_.Check(method, path, r->status, r->get_header_value("Content-Type"), r->body)) {
      ADD_FAILURE() << problem << "\n" << r->body;
    }
    ++checked_;
    return json::parse(r->body, nullptr, false);
  }
  // The /v1/images routes, as the admin and a tenant whose artifact cnn.pt is no archive.
  void ExerciseImages(const std::string& admin, const std::string& token);

  testing::OpenApiDocument doc_{std::string(WEFT_SOURCE_DIR) + "/docs/openapi.yaml"};
  int checked_ = 0;
};

TEST_F(ApiContractTest, EveryAnswerOnEveryRouteMatchesTheDocument) {
  const std::string admin = weftd_->admin_token();
  Call("", "GET", "/healthz");
  Call("", "GET", "/v1/jobs", "", 401);
  Call("", "GET", "/ui/");
  Call("", "GET", "/ui/app.js");
  Call("", "GET", "/ui/no-such.js", "", 404);
  // The admin's side.
  Call(admin, "POST", "/v1/tenants", R"({"name": "vision", "quota": {"cpus": 1}, "weight": 2})",
       201);
  Call(admin, "POST", "/v1/tenants", R"({"name": "vision"})", 409);
  Call(admin, "POST", "/v1/tenants", R"({"name": 3})", 400);
  // Found by fuzz_rest: an empty key in a body gave a problem with an empty field.
  const json empty_key =
      Call(admin, "POST", "/v1/tenants", R"({"name": "x", "": 1, "quota": {"": 2}})", 400);
  EXPECT_EQ(empty_key["error"]["details"][0].value("field", ""), "\"\"");
  EXPECT_EQ(empty_key["error"]["details"][1].value("field", ""), "quota.\"\"");
  Call(admin, "GET", "/v1/tenants");
  Call(admin, "GET", "/v1/tenants/vision");
  Call(admin, "PATCH", "/v1/tenants/vision", R"({"quota": null})");
  const std::string token = Call(admin, "POST", "/v1/tenants/vision/tokens", "", 201)["token"];
  Call(admin, "GET", "/v1/tenants/vision/tokens");
  EXPECT_EQ(Call(admin, "GET", "/v1/whoami")["admin"], true);
  EXPECT_EQ(Call(token, "GET", "/v1/whoami")["tenant"], "vision");
  Call(token, "GET", "/v1/tenants", "", 403);
  // Data sets: the admin registers them (checked: the directory must hold the format's files),
  // tenants see the ones granted to them, without paths.
  Call(admin, "GET", "/v1/datasets");
  Call(admin, "POST", "/v1/datasets",
       R"({"name": "scans", "path": "/usr/share/datasets/fashion-mnist", "tenants": ["vision"]})",
       201);
  Call(admin, "POST", "/v1/datasets",
       R"({"name": "scans", "path": "/usr/share/datasets/fashion-mnist", "tenants": "all"})", 409);
  const json bad_set = Call(admin, "POST", "/v1/datasets",
                            R"({"name": "etc", "path": "/etc", "tenants": ["nobody"]})", 400);
  EXPECT_EQ(bad_set["error"]["details"][0].value("field", ""), "path");
  EXPECT_EQ(bad_set["error"]["details"][1].value("problem", ""), "no tenant 'nobody'");
  Call(admin, "GET", "/v1/datasets/scans");
  Call(token, "POST", "/v1/datasets", R"({"name": "x", "path": "/", "tenants": "all"})", 403);
  const json mine = Call(token, "GET", "/v1/datasets");
  ASSERT_EQ(mine["datasets"].size(), 2u) << mine.dump();  // fashion-mnist (all) and scans
  EXPECT_FALSE(mine["datasets"][0].contains("path"));
  Call(token, "GET", "/v1/datasets/scans");
  Call(token, "DELETE", "/v1/datasets/scans", "", 403);
  Call(admin, "DELETE", "/v1/datasets/scans");
  Call(token, "GET", "/v1/datasets/scans", "", 404);
  // A name no data set can have is a 400 naming it, not a 404.
  const json bad_name = Call(admin, "GET", "/v1/datasets/-scans", "", 400);
  EXPECT_EQ(bad_name["error"].value("message", ""), "invalid data set name");
  EXPECT_EQ(bad_name["error"]["details"][0].value("problem", ""), "must not start with '.' or '-'");
  Call(admin, "DELETE", "/v1/datasets/..", "", 400);
  // The tenant's side: a bad manifest, then a short job run to the end.
  Call(token, "POST", "/v1/jobs", "name: x\ntraining: {epochs: -1}\n", 400);
  const json job = Call(token, "POST", "/v1/jobs",
                        "name: contract\nmodel: {architecture: mlp, hidden_units: [32]}\n"
                        "data: {train_samples: 2000, test_samples: 500}\n"
                        "training: {epochs: 1, batch_size: 64, threads: 1}\n"
                        "resources: {cpus: 1, memory_mb: 512}\ntargets: {deliver: 0.1}\n",
                        201);
  const std::string id = job.value("id", "");
  Call(token, "GET", "/v1/jobs?limit=10");
  EXPECT_EQ(Call(token, "GET", "/v1/jobs?limit=0", "", 400)["error"]["details"][0]["problem"],
            "must be an integer in [1, 1000]");
  Call(token, "GET", "/v1/queue");
  Call(token, "GET", "/v1/nodes");
  Call(token, "PUT", "/v1/jobs", "", 405);
  for (int i = 0; i < 600; ++i) {
    if (Call(token, "GET", "/v1/jobs/" + id).value("state", "") == "COMPLETED") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const json detail = Call(token, "GET", "/v1/jobs/" + id);
  ASSERT_EQ(detail.value("state", ""), "COMPLETED") << detail.dump(2);
  EXPECT_TRUE(detail["models"].contains("delivered"));
  Call(token, "GET", "/v1/jobs/" + id + "/metrics?limit=5");
  Call(token, "GET", "/v1/jobs/" + id + "/logs");
  Call(token, "GET", "/v1/jobs/" + id + "/logs?rank=7", "", 400);
  // An experiment: refused, stored, shown, halted, resumed and deleted.
  const std::string search =
      "kind: Experiment\nname: contract-search\n"
      "job: {model: {architecture: mlp, hidden_units: [32]}, data: {train_samples: 2000, "
      "test_samples: 500}, training: {epochs: 2, threads: 1}, resources: {cpus: 1}}\n"
      "search: {space: {training.learning_rate: {choice: [0.01, 0.001]}}, eta: 2, max_trials: 2}\n";
  const json bad_search =
      Call(token, "POST", "/v1/experiments", search + "targets: {deliver: 2}\n", 400);
  EXPECT_EQ(bad_search["error"]["details"][0].value("field", ""), "targets.deliver");
  Call(admin, "POST", "/v1/experiments", search, 403);
  const std::string exp = Call(token, "POST", "/v1/experiments", search, 201).value("id", "");
  Call(token, "GET", "/v1/experiments");
  Call(token, "GET", "/v1/experiments/" + exp);
  Call(token, "POST", "/v1/experiments/" + exp + "/resume", "", 409);
  Call(token, "POST", "/v1/experiments/" + exp + "/halt");
  Call(token, "POST", "/v1/experiments/" + exp + "/halt", "", 409);
  Call(token, "POST", "/v1/experiments/" + exp + "/resume");
  Call(token, "DELETE", "/v1/experiments/" + exp);
  Call(token, "GET", "/v1/experiments/" + exp, "", 404);
  // The job's stream is its snapshot and the end now that it is settled; the tenant's stream
  // from event 0 replays its life (read until the server's read timeout, then checked).
  Call(token, "GET", "/v1/jobs/" + id + "/events");
  {
    auto c = weftd_->ClientAs(token);
    // Event ids are RUN-SEQ; RUN-0 is before this run's first event.
    auto opening = c.Get("/v1/jobs/" + id + "/events");
    ASSERT_TRUE(opening);
    std::smatch run;
    ASSERT_TRUE(std::regex_search(opening->body, run, std::regex("id: ([0-9]+)-[0-9]+")))
        << opening->body;
    c.set_read_timeout(2, 0);
    std::string body, type;
    c.Get(
        "/v1/events?after=" + run[1].str() + "-0",
        [&](const httplib::Response& r) {
          type = r.get_header_value("Content-Type");
          return true;
        },
        [&](const char* d, size_t n) {
          body.append(d, n);
          return body.find("\"state\":\"COMPLETED\"") == std::string::npos;
        });
    EXPECT_EQ(type, "text/event-stream");
    EXPECT_NE(body.find("event: progress"), std::string::npos) << body;
    for (const std::string& problem : doc_.Check("GET", "/v1/events", 200, type, body)) {
      ADD_FAILURE() << problem << "\n" << body;
    }
  }
  Call(token, "GET", "/v1/jobs/" + id + "/model?which=delivered");
  Call(token, "GET", "/v1/jobs/" + id + "/model?which=best", "", 400);
  // Prometheus's view, for the admin only: the job's transitions and models were counted, the
  // REST requests timed by route template.
  Call(token, "GET", "/metrics", "", 403);
  Call(admin, "GET", "/metrics");
  auto scraped = weftd_->ClientAs(admin).Get("/metrics");
  ASSERT_TRUE(scraped);
  const std::string& text = scraped->body;
  EXPECT_NE(text.find("weft_job_transitions_total{state=\"COMPLETED\",tenant=\"vision\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("weft_models_committed_total{kind=\"delivered\",tenant=\"vision\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("weft_http_request_duration_seconds_bucket{code=\"200\",le=\"+Inf\","
                      "method=\"GET\",route=\"/v1/jobs/{id}\"}"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE weft_scheduling_round_duration_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(text.find("weft_node_cpus{node=\"local\"}"), std::string::npos);
  // Prometheus's own parser and linter agree (scripts/install-deps.sh unpacks promtool).
  const std::string promtool = "/usr/local/lib/weft/prometheus/usr/bin/promtool";
  if (!std::filesystem::exists(promtool)) {
    ADD_FAILURE() << promtool << " is missing: run scripts/install-deps.sh";
  } else {
    std::ofstream(dir_ + "/scrape.txt") << text;
    auto check = testing::RunCommand(
        {"/bin/sh", "-c", promtool + " check metrics < " + dir_ + "/scrape.txt"}, {}, 60);
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_EQ(check.output, "") << "promtool's lint";
  }
  Call(token, "POST", "/v1/jobs/" + id + "/halt", "", 409);
  Call(token, "POST", "/v1/jobs/" + id + "/resume", "", 409);
  Call(token, "GET", "/v1/jobs/job-0000000000-none", "", 404);
  Call(token, "DELETE", "/v1/jobs/" + id);
  // The tenant's webhooks: registered (the secret shown once), listed, refused, deleted.
  const json hook = Call(token, "POST", "/v1/webhooks",
                         R"({"url": "http://127.0.0.1:9/hook", "events": ["COMPLETED"]})", 201);
  EXPECT_EQ(hook.value("secret", "").rfind("whsec_", 0), 0u) << hook.dump();
  Call(token, "POST", "/v1/webhooks", R"({"url": "http://10.0.0.1/hook", "events": ["FAILED"]})",
       400);
  Call(admin, "POST", "/v1/webhooks", R"({"url": "http://127.0.0.1:9/", "events": ["FAILED"]})",
       403);
  Call(token, "GET", "/v1/webhooks");
  Call(admin, "GET", "/v1/webhooks", "", 403);
  Call(token, "DELETE", "/v1/webhooks/" + hook.value("id", ""));
  Call(token, "DELETE", "/v1/webhooks/" + hook.value("id", ""), "", 404);
  // The tenant's artifacts.
  Call(token, "POST", "/v1/artifacts?name=cnn.pt", "weights", 201);
  Call(token, "POST", "/v1/artifacts?name=cnn.pt", "other weights", 200);
  Call(token, "POST", "/v1/artifacts?name=.x", "weights", 400);
  Call(admin, "GET", "/v1/artifacts", "", 403);
  Call(token, "GET", "/v1/artifacts");
  Call(token, "GET", "/v1/artifacts/cnn.pt");
  Call(token, "GET", "/v1/artifacts/cnn.pt/content");
  Call(token, "GET", "/v1/artifacts/none.pt", "", 404);
  // Images: a tenant's from one of its artifacts (this one is no archive: 400 naming the
  // field), the admin's from a file on weftd's host; nothing else of either. Without a container
  // engine (WEFT_TEST_RUNTIME=none) every image route is 409.
  const char* runtime = getenv("WEFT_TEST_RUNTIME");
  if (runtime != nullptr && std::string(runtime) == "none") {
    Call(token, "GET", "/v1/images", "", 409);
  } else {
    ExerciseImages(admin, token);
  }
  Call(token, "DELETE", "/v1/artifacts/cnn.pt");
  // And the admin tidies up.
  const std::string token_id = Call(admin, "GET", "/v1/tenants/vision/tokens")["tokens"][0]["id"];
  Call(admin, "DELETE", "/v1/tenants/vision/tokens/" + token_id);
  Call(admin, "DELETE", "/v1/tenants/vision");
  Call(admin, "GET", "/v1/tenants/vision", "", 404);
  Call(admin, "POST", "/v1/admin/token/rotate", "", 201);
  EXPECT_GE(checked_, 30);
}

void ApiContractTest::ExerciseImages(const std::string& admin, const std::string& token) {
  Call(token, "GET", "/v1/images");
  Call(admin, "GET", "/v1/images");
  const json not_image =
      Call(token, "POST", "/v1/images", R"({"name": "env", "artifact": "cnn.pt"})", 400);
  EXPECT_EQ(not_image["error"]["details"][0].value("field", ""), "artifact");
  Call(token, "POST", "/v1/images", R"({"name": "env", "path": "/etc/passwd"})", 400);
  Call(admin, "POST", "/v1/images", R"({"name": "env", "path": "/etc/passwd", "tenants": "all"})",
       400);
  Call(token, "GET", "/v1/images/env", "", 404);
  Call(token, "DELETE", "/v1/images/env", "", 404);
  Call(admin, "GET", "/v1/images/-env", "", 400);
}

TEST(OpenApiDocumentTest, RefusesWhatTheDocumentDoesNotSay) {
  testing::OpenApiDocument doc(std::string(WEFT_SOURCE_DIR) + "/docs/openapi.yaml");
  const std::string json_type = "application/json";
  const std::string job =
      R"({"id": "j", "name": "n", "tenant": "t", "state": "QUEUED", "reason": "r",
          "created_at": "x", "updated_at": "x", "attempt": 0, "node": null, "learners": [],
          "servers": [],
          "progress": {"epoch": 0, "epochs_total": 1, "step": 0, "steps_total": 0,
                       "samples": 0, "fraction": 0.0}, "best_test_accuracy": null,
          "targets_met": []})";
  EXPECT_THAT(doc.Check("POST", "/v1/jobs", 201, json_type, job), ::testing::IsEmpty());
  auto first = [&](const std::string& method, const std::string& path, int status,
                   const std::string& body) {
    auto problems = doc.Check(method, path, status, json_type, body);
    return problems.empty() ? std::string() : problems[0];
  };
  EXPECT_THAT(first("GET", "/v1/jobz", 200, "{}"), ::testing::HasSubstr("route is not in"));
  EXPECT_THAT(first("GET", "/v1/queue", 409, "{}"), ::testing::HasSubstr("status is not in"));
  std::string bad = job;
  bad.replace(bad.find("\"attempt\": 0"), 12, "\"attempt\": \"0\"");
  EXPECT_THAT(first("POST", "/v1/jobs", 201, bad), ::testing::HasSubstr("not of type integer"));
  bad = job;
  bad.replace(bad.find("QUEUED"), 6, "WAITING");
  EXPECT_THAT(first("POST", "/v1/jobs", 201, bad), ::testing::HasSubstr("not in the enum"));
  bad = job;
  bad.replace(bad.find("\"tenant\": \"t\","), 14, "");
  EXPECT_THAT(first("POST", "/v1/jobs", 201, bad), ::testing::HasSubstr("'tenant' is missing"));
  bad = job;
  bad.replace(bad.find("\"name\": \"n\""), 11, "\"name\": null");
  EXPECT_THAT(first("POST", "/v1/jobs", 201, bad), ::testing::HasSubstr("not nullable"));
  EXPECT_THAT(first("GET", "/v1/jobs/j", 404, R"({"error": {"code": "not_found"}})"),
              ::testing::HasSubstr("'message' is missing"));
}

}  // namespace
}  // namespace weft
