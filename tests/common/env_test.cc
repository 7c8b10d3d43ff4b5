// WriteFileAtomic's promise under a failing disk: the old content stays, no temporary file is
// left behind, and the error says the disk is full.
#include "common/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/fault_env.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-env-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int FilesIn(const std::string& dir) {
    return static_cast<int>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
  }
  std::string dir_;
};

TEST_F(EnvTest, AFullDiskLeavesTheOldContentAndNoTemporaryFile) {
  testing::FaultInjectionEnv env;
  const std::string path = dir_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(env, path, "old").ok());
  env.FailWrites("state.json", 1);
  absl::Status s = WriteFileAtomic(env, path, std::string(4096, 'x'));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("No space left on device"));
  EXPECT_EQ(env.injected(), 1);
  EXPECT_EQ(*env.ReadFile(path), "old");
  EXPECT_EQ(FilesIn(dir_), 1) << "the half-written temporary file must be removed";
  // The disk has room again: the next write goes through.
  ASSERT_TRUE(WriteFileAtomic(env, path, "new").ok());
  EXPECT_EQ(*env.ReadFile(path), "new");
}

TEST_F(EnvTest, ModesAreExactAndErrorsAreClassified) {
  Env& env = Env::Default();
  const std::string secret = dir_ + "/secret";
  ASSERT_TRUE(WriteFileAtomic(env, secret, "s", 0600).ok());
  EXPECT_EQ(fs::status(secret).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(absl::IsNotFound(env.ReadFile(dir_ + "/missing").status()));
  EXPECT_TRUE(absl::IsNotFound(env.FileSize(dir_ + "/missing").status()));
  EXPECT_TRUE(env.RemoveFile(dir_ + "/missing").ok());
  EXPECT_EQ(*env.FileSize(secret), 1);
}

// Writers of one path at the same time (threads here; processes and hosts by the same name) each
// write a temporary file of their own, so every write succeeds, the file holds one writer's
// whole data, and no temporary file is left.
TEST_F(EnvTest, ConcurrentAtomicWritesOfOnePathEachLeaveAWholeFile) {
  Env& env = Env::Default();
  const std::string path = dir_ + "/shared.tsv";
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      const std::string data(4096, static_cast<char>('a' + t));
      for (int i = 0; i < 50; ++i) {
        if (!WriteFileAtomic(env, path, data).ok()) ++failed;
      }
    });
  }
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(failed.load(), 0);
  auto data = env.ReadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->size(), 4096u);
  EXPECT_EQ(data->find_first_not_of((*data)[0]), std::string::npos) << "one writer's whole data";
  EXPECT_THAT(*env.ListFiles(dir_), ::testing::ElementsAre("shared.tsv"));
}

TEST_F(EnvTest, ListFilesNamesRegularFilesOnly) {
  Env& env = Env::Default();
  ASSERT_TRUE(WriteFileAtomic(env, dir_ + "/a", "1").ok());
  ASSERT_TRUE(WriteFileAtomic(env, dir_ + "/b.tmp.7", "2").ok());
  ASSERT_TRUE(env.MakeDirs(dir_ + "/sub").ok());
  auto names = env.ListFiles(dir_);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ::testing::UnorderedElementsAre("a", "b.tmp.7"));
  auto none = env.ListFiles(dir_ + "/missing");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace weft
