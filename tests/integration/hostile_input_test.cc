// Untrusted input through a real weftd: text that is not text, bodies over the limit, methods
// probed without a token, and a learner key too short to protect anything. Every answer is a 4xx
// that says what is wrong, never a 5xx.
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_process.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using testing::WeftdProcess;

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-hostile-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    weftd_.reset();
    std::filesystem::remove_all(dir_);
  }
  void StartWeftd(std::vector<std::string> args = {}) {
    weftd_ = std::make_unique<WeftdProcess>(dir_ + "/data");
    weftd_->set_args(std::move(args));
    ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  }
  // POSTs `body` as a manifest; the status and the parsed answer.
  std::pair<int, json> Submit(const std::string& body) {
    auto r = weftd_->Client().Post("/v1/jobs", body, "application/yaml");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // The problem the answer's details give for `field`, or "".
  static std::string ProblemOf(const json& answer, const std::string& field) {
    for (const auto& d : answer["error"].value("details", json::array())) {
      if (d.value("field", "") == field) return d.value("problem", "");
    }
    return "";
  }

  std::string dir_;
  std::unique_ptr<WeftdProcess> weftd_;
};

TEST_F(HostileInputTest, TextThatIsNotTextIsA400NamingTheField) {
  StartWeftd();
  // Invalid UTF-8 in the name used to be a 500 from the JSON encoder.
  auto [status, answer] =
      Submit("name: ab\xff\xfe\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n");
  EXPECT_EQ(status, 400) << answer.dump(2);
  EXPECT_THAT(ProblemOf(answer, "name"), HasSubstr("invalid UTF-8 at byte 2"));
  // A NUL in the data path (in a JSON manifest) and an escape sequence in the description.
  std::tie(status, answer) = Submit(
      R"({"name": "x", "model": {"architecture": "mlp"}, "training": {"epochs": 1},
          "data": {"path": "/usr/share\u0000/etc"}, "description": "\u001b[2J"})");
  EXPECT_EQ(status, 400) << answer.dump(2);
  EXPECT_THAT(ProblemOf(answer, "data.path"), HasSubstr("control character (0x00) at byte 10"));
  EXPECT_THAT(ProblemOf(answer, "description"), HasSubstr("control character (0x1b) at byte 0"));
  // Nothing was stored.
  auto list = weftd_->Client().Get("/v1/jobs");
  ASSERT_TRUE(list);
  EXPECT_TRUE(json::parse(list->body)["jobs"].empty());
}

TEST_F(HostileInputTest, ABodyOverTheLimitIsA413) {
  StartWeftd({"--max-request-bytes", "65536"});
  auto [status, answer] = Submit("name: x\ndescription: " + std::string(100000, 'a') + "\n");
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

TEST_F(HostileInputTest, AShortLearnerKeyStopsWeftdFromStarting) {
  std::filesystem::create_directories(dir_ + "/data");
  std::ofstream(dir_ + "/data/learner.key") << "";  // every credential would pass
  weftd_ = std::make_unique<WeftdProcess>(dir_ + "/data");
  EXPECT_FALSE(weftd_->Start());
  EXPECT_THAT(weftd_->log(),
              HasSubstr("learner.key holds 0 bytes; a learner key needs at least 32"));
}

}  // namespace
}  // namespace weft
