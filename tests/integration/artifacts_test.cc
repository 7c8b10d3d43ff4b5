// Tenants' artifacts through a real weftd and the real CLI: uploads stored once per tenant by
// content, owner-only on disk, invisible to other tenants, bounded in size per file and per
// tenant, streamed back unchanged, and cleared of what a crash left half done.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class ArtifactsTest : public testing::WeftdTest {
 protected:
  // 1 MiB per artifact, 2 MiB per tenant: small enough to reach in a test.
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("artifacts");
    o.args = {"--max-artifact-mb", "1", "--tenant-artifact-mb", "2"};
    return o;
  }

  // A file of `bytes` random bytes (seeded by `seed`) in the test's directory.
  std::string RandomFile(const std::string& name, size_t bytes, unsigned seed) {
    std::string data(bytes, '\0');
    std::mt19937 rng(seed);
    for (char& c : data) c = static_cast<char>(rng());
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The content files of `tenant` on disk (not uploads in progress).
  std::vector<std::filesystem::path> Stored(const std::string& tenant) {
    std::vector<std::filesystem::path> out;
    const std::string d = dir_ + "/data/artifacts/" + tenant;
    if (!std::filesystem::exists(d)) return out;
    for (const auto& f : std::filesystem::directory_iterator(d)) out.push_back(f.path());
    return out;
  }
};

TEST_F(ArtifactsTest, StoredOnceByContentOwnerOnlyAndReturnedUnchanged) {
  const std::string model = RandomFile("model.pt", 300000, 1);
  auto up = weftd_->Cli({"artifact", "upload", model});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  EXPECT_THAT(up.output, HasSubstr("uploaded artifact model.pt"));
  // The same bytes under a second name: one file on disk.
  up = weftd_->Cli({"artifact", "upload", model, "--name", "copy.pt"});
  ASSERT_EQ(up.exit_code, 0) << up.output;
  auto stored = Stored("default");
  ASSERT_EQ(stored.size(), 1u);
  struct stat st {};
  ASSERT_EQ(stat(stored[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 300000);

  auto c = weftd_->Client();
  auto list = c.Get("/v1/artifacts");
  ASSERT_TRUE(list);
  json j = json::parse(list->body);
  ASSERT_EQ(j["artifacts"].size(), 2u) << list->body;
  EXPECT_EQ(j["artifacts"][0]["name"], "copy.pt");
  EXPECT_EQ(j["artifacts"][0]["sha256"], j["artifacts"][1]["sha256"]);
  EXPECT_EQ(j["bytes_used"], 300000) << "stored once, counted once";

  auto down = weftd_->Cli({"artifact", "download", "copy.pt", "-o", dir_ + "/back.pt"});
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_EQ(Read(dir_ + "/back.pt"), Read(model));

  // Replacing a name with other content keeps the content the other name still points at.
  const std::string other = RandomFile("other.pt", 1000, 2);
  auto replaced = weftd_->Cli({"artifact", "upload", other, "--name", "copy.pt"});
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_THAT(replaced.output, HasSubstr("replaced artifact copy.pt"));
  EXPECT_EQ(Stored("default").size(), 2u);
  // Deleting the last name of a content removes its file; another name's stays.
  ASSERT_EQ(weftd_->Cli({"artifact", "delete", "model.pt"}).exit_code, 0);
  EXPECT_EQ(Stored("default").size(), 1u);
  EXPECT_EQ(c.Get("/v1/artifacts/model.pt")->status, 404);
  auto show = c.Get("/v1/artifacts/copy.pt");
  ASSERT_EQ(show->status, 200);
  EXPECT_EQ(json::parse(show->body)["bytes"], 1000);
}

TEST_F(ArtifactsTest, AnotherTenantsArtifactIsNotFoundAndTheAdminOwnsNone) {
  const std::string acme = NewTenant("acme");
  const std::string file = RandomFile("secret.pt", 5000, 3);
  ASSERT_EQ(weftd_->CliAs(acme, {"artifact", "upload", file}).exit_code, 0);
  auto other = weftd_->Client();  // tenant default
  EXPECT_EQ(other.Get("/v1/artifacts/secret.pt")->status, 404);
  EXPECT_EQ(other.Get("/v1/artifacts/secret.pt/content")->status, 404);
  EXPECT_EQ(other.Delete("/v1/artifacts/secret.pt")->status, 404);
  EXPECT_TRUE(json::parse(other.Get("/v1/artifacts")->body)["artifacts"].empty());
  // The same content uploaded by another tenant is that tenant's own copy.
  ASSERT_EQ(weftd_->Cli({"artifact", "upload", file}).exit_code, 0);
  EXPECT_EQ(Stored("acme").size(), 1u);
  EXPECT_EQ(Stored("default").size(), 1u);
  EXPECT_EQ(weftd_->ClientAs(weftd_->admin_token()).Get("/v1/artifacts")->status, 403);
  EXPECT_EQ(weftd_->ClientAs("").Get("/v1/artifacts")->status, 401);
  auto anonymous = weftd_->ClientAs("").Post("/v1/artifacts?name=x", std::string(100, 'x'),
                                             "application/octet-stream");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_TRUE(Stored("default").size() == 1u) << "nothing written for a caller without a token";
  // A tenant deleted takes its artifacts with it.
  ASSERT_EQ(weftd_->CliAs(weftd_->admin_token(), {"tenant", "delete", "acme"}).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/artifacts/acme"));
}

TEST_F(ArtifactsTest, BadNamesAndOversizedUploadsAreRefusedAndLeaveNothing) {
  auto c = weftd_->Client();
  for (const std::string name : {"", ".hidden", "-flag", "a/b", "sp%20ace", "x%1b"}) {
    auto r = c.Post("/v1/artifacts?name=" + name, "data", "application/octet-stream");
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 400) << name << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["details"][0]["field"], "name") << r->body;
  }
  // Over the per-artifact limit: refused from its Content-Length, before a byte is stored.
  const std::string big = RandomFile("big.bin", (1 << 20) + 1, 4);
  auto r = weftd_->Cli({"artifact", "upload", big});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--max-artifact-mb"));
  // Over the tenant's room: two of 0.9 MiB fit in 2 MiB, a third does not.
  for (int i = 0; i < 2; ++i) {
    const std::string f = RandomFile("part" + std::to_string(i), 900 << 10, 10 + i);
    ASSERT_EQ(weftd_->Cli({"artifact", "upload", f}).exit_code, 0);
  }
  r = weftd_->Cli({"artifact", "upload", RandomFile("part2", 900 << 10, 12)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--tenant-artifact-mb"));
  EXPECT_EQ(Stored("default").size(), 2u) << "no temporary file is left behind";
  // A body over a route's limit is refused from its headers alone, before a byte of it is sent.
  auto head_only = [&](const std::string& path) {
    const std::string head = "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                             weftd_->token() + "\r\nContent-Length: 5242880\r\n\r\n";
    return testing::RawExchange(weftd_->port(), head);
  };
  EXPECT_THAT(head_only("/v1/jobs"), HasSubstr("413"));
  EXPECT_THAT(head_only("/v1/jobs"), HasSubstr("--max-request-bytes"));
  EXPECT_THAT(head_only("/v1/artifacts?name=big"), HasSubstr("--max-artifact-mb"));
}

TEST_F(ArtifactsTest, SubmitUploadsFirstAndARestartClearsWhatACrashLeft) {
  const std::string file = RandomFile("weights.pt", 2000, 5);
  const std::string manifest = dir_ + "/job.yaml";
  std::ofstream(manifest) << "name: up\nmodel: {architecture: mlp, hidden_units: [16]}\n"
                             "data: {train_samples: 500, test_samples: 100}\n"
                             "training: {epochs: 1, threads: 1}\n";
  auto s = weftd_->Cli({"submit", manifest, "--upload", "w.pt=" + file});
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_THAT(s.output, HasSubstr("uploaded artifact w.pt"));
  EXPECT_EQ(weftd_->Client().Get("/v1/artifacts/w.pt")->status, 200);
  auto bad = weftd_->Cli({"submit", manifest, "--upload", "nopath"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("NAME=PATH"));

  // What a weftd killed mid-upload or mid-delete leaves: a temporary file and a content no name
  // points at. The next weftd removes both and keeps the named one.
  weftd_->Kill();
  const std::string d = dir_ + "/data/artifacts/default/";
  std::ofstream(d + ".upload-0123456789") << "half";
  std::ofstream(d + std::string(64, 'a')) << "orphan";
  ASSERT_TRUE(weftd_->Start()) << weftd_->log();
  auto stored = Stored("default");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(Read(stored[0].string()), Read(file));
}

}  // namespace
}  // namespace weft
