#include "api/http.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace weft::api {
namespace {

class SendFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-http-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    server_.Get("/file", [this](const httplib::Request&, httplib::Response& res) {
      absl::Status s = SendFile(res, dir_ + "/f", "application/octet-stream");
      if (!s.ok()) SendStatus(res, s);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
    std::filesystem::remove_all(dir_);
  }
  httplib::Result Get() { return httplib::Client("127.0.0.1", port_).Get("/file"); }

  std::string dir_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(SendFileTest, AFileOfManyChunksArrivesWholeWithItsLength) {
  std::string bytes(5 * kFileChunkBytes + 123, '\0');
  std::mt19937 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  std::ofstream(dir_ + "/f", std::ios::binary) << bytes;
  auto r = Get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(bytes.size()));
  EXPECT_TRUE(r->body == bytes);
}

TEST_F(SendFileTest, AMissingFileIs404AndASymlinkIsRefused) {
  auto r = Get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  std::ofstream(dir_ + "/secret") << "not for download";
  std::filesystem::create_symlink(dir_ + "/secret", dir_ + "/f");
  r = Get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body.find("not for download"), std::string::npos);
}

TEST_F(SendFileTest, ChunksAreReadFromAnOffsetAndNeverThroughASymlink) {
  std::string bytes(kFileChunkBytes + 10, 'x');
  bytes.back() = 'y';
  std::ofstream(dir_ + "/f", std::ios::binary) << bytes;
  EXPECT_EQ(ReadFileChunk(dir_ + "/f", 0).size(), kFileChunkBytes);
  EXPECT_EQ(ReadFileChunk(dir_ + "/f", kFileChunkBytes), "xxxxxxxxxy");
  EXPECT_EQ(ReadFileChunk(dir_ + "/f", bytes.size()), "");
  std::filesystem::create_symlink(dir_ + "/f", dir_ + "/link");
  EXPECT_EQ(ReadFileChunk(dir_ + "/link", 0), "");
  EXPECT_EQ(ReadFileChunk(dir_ + "/missing", 0), "");
}

// A learner (the tenant's code) owns the directories below its job's results and logs: it
// could put a link to another job's directory where weftd expects one of its own.
TEST_F(SendFileTest, ALinkInPlaceOfADirectoryOnThePathIsRefusedToo) {
  std::filesystem::create_directories(dir_ + "/other/final");
  std::ofstream(dir_ + "/other/final/model.pt") << "another job's model";
  std::filesystem::create_directories(dir_ + "/mine");
  std::filesystem::create_directory_symlink(dir_ + "/other/final", dir_ + "/mine/final");
  httplib::Response res;
  EXPECT_FALSE(SendFile(res, dir_ + "/mine/final/model.pt", "application/octet-stream").ok());
  EXPECT_EQ(ReadFileChunk(dir_ + "/mine/final/model.pt", 0), "");
  EXPECT_EQ(ReadFileChunk(dir_ + "/other/final/model.pt", 0), "another job's model");
}

TEST_F(SendFileTest, AnEmptyFileIsAnEmptyAnswer) {
  std::ofstream(dir_ + "/f").close();
  auto r = Get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "");
}

}  // namespace
}  // namespace weft::api
