// Webhooks through a real weftd, a real learner and a real receiver (an HTTP server in the test):
// signed deliveries, retries, refusal of receivers the admin did not allow, and deliveries owed
// when weftd was killed made after it restarts.
#include <openssl/hmac.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
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

const std::string kSmoke = std::string(WEFT_SOURCE_DIR) + "/examples/fashion-mnist-mlp-smoke.yaml";

// HMAC-SHA256 with OpenSSL directly, as a receiver would check it.
std::string Hmac(const std::string& key, const std::string& body) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), out, &n);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return "sha256=" + s;
}

// A webhook receiver on 127.0.0.1:`port`: records every request and answers 500 to the first
// `failures` attempts of each delivery, 200 after.
class Receiver {
 public:
  struct Request {
    std::string delivery, event, signature, body;
    int answered = 0;
  };
  Receiver(int port, int failures) : failures_(failures) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      Request r{req.get_header_value("X-Weft-Delivery"), req.get_header_value("X-Weft-Event"),
                req.get_header_value("X-Weft-Signature"), req.body, 200};
      if (attempts_[r.delivery]++ < failures_) r.answered = 500;
      res.status = r.answered;
      requests_.push_back(r);
    });
    ready_ = server_.bind_to_port("127.0.0.1", port);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  bool ready() const { return ready_; }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // The requests answered 200, in order.
  std::vector<Request> delivered() {
    std::vector<Request> out;
    for (const Request& r : requests()) {
      if (r.answered == 200) out.push_back(r);
    }
    return out;
  }
  // Waits up to `seconds` for `n` deliveries.
  bool AwaitDelivered(size_t n, int seconds) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (delivered().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  const int failures_;
  httplib::Server server_;
  std::thread thread_;
  bool ready_ = false;
  std::mutex mu_;
  std::vector<Request> requests_;
  std::map<std::string, int> attempts_;
};

class WebhooksTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("webhooks");
    o.args = {"--webhook-allow", "127.0.0.1:" + std::to_string(port_)};
    return o;
  }

  // Registers a webhook on the receiver's port; its answer.
  json Register(const json& events, const std::string& token = "") {
    const std::string body = json{
        {"url", "http://127.0.0.1:" + std::to_string(port_) + "/hook"},
        {"events", events}}.dump();
    auto r = weftd_->ClientAs(token.empty() ? weftd_->token() : token)
                 .Post("/v1/webhooks", body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 201) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  std::string RunSmokeJob() {
    auto submit = weftd_->Cli({"submit", kSmoke, "--follow"}, 240);
    EXPECT_EQ(submit.exit_code, 0) << submit.output;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(submit.output, m, std::regex("job (job-[0-9a-z-]+) submitted")));
    return m.size() ? m[1].str() : "";
  }

  json Webhooks() {
    auto r = weftd_->Client().Get("/v1/webhooks");
    return r ? json::parse(r->body, nullptr, false) : json();
  }

  int port_ = testing::FreePort();
};

TEST_F(WebhooksTest, AReceiverGetsDeliveredThenCompletedSignedEvenAfterFailingTwice) {
  Receiver receiver(port_, /*failures=*/2);
  ASSERT_TRUE(receiver.ready());
  const json hook = Register({"DELIVERED", "COMPLETED"});
  const std::string secret = hook.value("secret", "");
  ASSERT_EQ(secret.rfind("whsec_", 0), 0u) << hook.dump();
  const std::string id = RunSmokeJob();

  // Each delivery fails twice (500) and arrives on its third attempt, 1 s and 2 s later.
  ASSERT_TRUE(receiver.AwaitDelivered(2, 30)) << receiver.requests().size() << " requests";
  std::vector<Receiver::Request> all = receiver.requests();
  std::vector<Receiver::Request> ok = receiver.delivered();
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].event, "DELIVERED");
  EXPECT_EQ(ok[1].event, "COMPLETED");
  EXPECT_NE(ok[0].delivery, ok[1].delivery);
  for (const Receiver::Request& r : all) {
    EXPECT_EQ(r.signature, Hmac(secret, r.body)) << r.body;
    json body = json::parse(r.body);
    EXPECT_EQ(body["job"], id);
    EXPECT_EQ(body["event"], r.event);
    EXPECT_EQ(body["tenant"], "default");
    EXPECT_EQ(body["delivery"].get<int64_t>(), std::stoll(r.delivery));
    EXPECT_EQ(body["webhook"], hook["id"]);
  }
  for (const Receiver::Request& d : ok) {
    int attempts = 0;
    for (const Receiver::Request& r : all) {
      if (r.delivery != d.delivery) continue;
      ++attempts;
      EXPECT_EQ(r.body, d.body) << "every attempt sends the same bytes";
    }
    EXPECT_EQ(attempts, 3) << d.event;
  }
  EXPECT_THAT(json::parse(ok[0].body).value("reason", ""), HasSubstr("deliver target met"));
  // The webhook shows how its latest attempt went; the secret is not shown again.
  json list = Webhooks();
  ASSERT_EQ(list["webhooks"].size(), 1u) << list.dump();
  EXPECT_EQ(list["webhooks"][0]["last_status"], "200");
  EXPECT_EQ(list["webhooks"][0]["pending"], 0);
  EXPECT_FALSE(list["webhooks"][0].contains("secret"));
}

TEST_F(WebhooksTest, OnlyReceiversTheAdminAllowedAreAccepted) {
  auto post = [&](const std::string& token, const json& body) {
    auto r = weftd_->ClientAs(token).Post("/v1/webhooks", body.dump(), "application/json");
    return std::make_pair(r ? r->status : 0, r ? json::parse(r->body, nullptr, false) : json());
  };
  // Only the receiver the admin listed, by host and port: not another port of the same host
  // (a tenant cannot probe the host's ports), nor what the host is called otherwise.
  const std::string url = "http://127.0.0.1:" + std::to_string(port_) + "/hook";
  const std::vector<std::string> refused_urls = {
      "http://10.0.0.1/hook",
      "http://example.com/hook",
      "http://169.254.169.254/latest",
      "file:///etc/passwd",
      "http://user@127.0.0.1/hook",
      "http://127.0.0.1:99999/",
      "http://127.0.0.1:22/",
      "http://127.0.0.1/hook",
      "http://localhost:" + std::to_string(port_) + "/hook"};
  for (const std::string& bad : refused_urls) {
    auto [status, body] = post(weftd_->token(), {{"url", bad}, {"events", {"COMPLETED"}}});
    EXPECT_EQ(status, 400) << bad;
    EXPECT_EQ(body["error"]["details"][0]["field"], "url") << bad << body.dump();
  }
  auto [status, body] = post(weftd_->token(), {{"url", url}, {"events", {"DONE"}}});
  EXPECT_EQ(status, 400);
  EXPECT_EQ(body["error"]["details"][0]["field"], "events[0]");
  EXPECT_EQ(
      post(weftd_->admin_token(), {{"url", "http://127.0.0.1:1/x"}, {"events", {"FAILED"}}}).first,
      403);
  // The listed receiver is accepted (here through the CLI); another tenant cannot see or
  // delete it.
  auto refused = weftd_->Cli({"webhook", "add", "http://10.0.0.1/hook"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("receiver '10.0.0.1' port 80 is not one weftd may call"));
  auto added = weftd_->Cli({"webhook", "add", url, "--events", "failed,completed"});
  ASSERT_EQ(added.exit_code, 0) << added.output;
  EXPECT_THAT(added.output, HasSubstr("secret (shown only now): whsec_"));
  std::smatch id;
  ASSERT_TRUE(std::regex_search(added.output, id, std::regex("webhook (hook-[0-9a-f]+) added")));
  auto listed = weftd_->Cli({"webhook", "list"});
  EXPECT_THAT(listed.output, HasSubstr(id[1].str()));
  EXPECT_THAT(listed.output, HasSubstr("FAILED,COMPLETED"));
  const std::string admin = weftd_->admin_token();
  ASSERT_EQ(weftd_->CliAs(admin, {"tenant", "create", "other"}).exit_code, 0);
  auto t = weftd_->CliAs(admin, {"token", "create", "other"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(t.output, m, std::regex("weft_[0-9a-f]{64}")));
  auto other = weftd_->ClientAs(m[0].str());
  EXPECT_EQ(json::parse(other.Get("/v1/webhooks")->body)["webhooks"].size(), 0u);
  EXPECT_EQ(other.Delete("/v1/webhooks/" + id[1].str())->status, 404);
  EXPECT_EQ(weftd_->Cli({"webhook", "delete", id[1].str()}).exit_code, 0);
  EXPECT_EQ(Webhooks()["webhooks"].size(), 0u);
}

TEST_F(WebhooksTest, ADeliveryOwedWhenWeftdIsKilledIsMadeAfterItRestarts) {
  // Nobody listens yet: the COMPLETED delivery is attempted and stays owed.
  Register({"COMPLETED"});
  RunSmokeJob();
  for (int i = 0; i < 100; ++i) {
    json hooks = Webhooks();
    if (hooks["webhooks"][0].value("last_status", "") != "") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  json before = Webhooks()["webhooks"][0];
  // Why it failed is for weftd's log: a tenant learns no more than that it was not delivered.
  EXPECT_EQ(before.value("last_status", ""), "not delivered") << before.dump();
  EXPECT_THAT(weftd_->log(), HasSubstr("not reached: Connection"));
  EXPECT_EQ(before["pending"], 1);
  weftd_->Kill();
  Receiver receiver(port_, /*failures=*/0);
  ASSERT_TRUE(receiver.ready());
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  ASSERT_TRUE(receiver.AwaitDelivered(1, 30)) << weftd_->log();
  EXPECT_EQ(receiver.delivered()[0].event, "COMPLETED");
  // weftd marks the delivery made once the receiver's answer is back, just after the receiver
  // has counted it.
  json after;
  for (int i = 0; i < 100; ++i) {
    after = Webhooks()["webhooks"][0];
    if (after["pending"] == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(after["pending"], 0) << after.dump();
}

}  // namespace
}  // namespace weft
