// WriteFileAtomic's promise under a failing disk: the old content stays, no temporary file is
// left behind, and the error says the disk is full.
#include "common/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

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
