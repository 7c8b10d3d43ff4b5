// Walking trees a tenant's program wrote (common/file_tree.h): nothing hides from the measure,
// what cannot be walked is a finding, and removal goes to the bottom of any nesting.
#include "common/file_tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/deep_tree.h"

namespace weft {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FileTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-file-tree-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { (void)RemoveTree(dir_); }
  DiskUsage Measure(const std::string& root, DiskUsageWalk::Limits limits = {}) {
    DiskUsageWalk walk(limits);
    walk.Add(root);
    return walk.usage();
  }
  std::string dir_;
};

TEST_F(FileTreeTest, ATreeNestedPastPathMaxIsCountedToTheBottom) {
  // 30 directories of 250-character names: 7,530 characters of path to the file, past PATH_MAX
  // (4,096), where a walk by path stopped counting.
  ASSERT_TRUE(testing::MakeDeepTree(dir_, 30, 250, 1 << 20));
  const DiskUsage usage = Measure(dir_);
  EXPECT_THAT(usage.unmeasured, IsEmpty());
  EXPECT_GE(usage.bytes, 1 << 20);
  EXPECT_EQ(usage.inodes, 1 + 30 + 1) << "the root, 30 directories, the file";
}

TEST_F(FileTreeTest, WhatCannotBeWalkedIsAFindingNotZero) {
  ASSERT_TRUE(testing::MakeDeepTree(dir_, 10, 8, 4096));
  const DiskUsage deep = Measure(dir_, {/*max_depth=*/5, /*max_inodes=*/1000});
  ASSERT_EQ(deep.unmeasured.size(), 1u);
  EXPECT_THAT(deep.unmeasured[0], HasSubstr("nested deeper than 5 directories"));
  EXPECT_THAT(deep.unmeasured[0], HasSubstr(dir_ + "/dddddddd/"));

  const DiskUsage many = Measure(dir_, {/*max_depth=*/100, /*max_inodes=*/4});
  ASSERT_EQ(many.unmeasured.size(), 1u);
  EXPECT_THAT(many.unmeasured[0], HasSubstr("more than 4 files; the rest not walked"));
  EXPECT_EQ(Measure("/nonexistent/weft").unmeasured.size(), 0u) << "no tree, nothing to say";
}

TEST_F(FileTreeTest, LinksAreNotFollowedAndEachInodeCountsOnce) {
  const std::string outside = dir_ + "/outside", tree = dir_ + "/tree";
  ASSERT_TRUE(std::filesystem::create_directories(outside));
  ASSERT_TRUE(std::filesystem::create_directories(tree));
  { std::ofstream(outside + "/big") << std::string(1 << 20, 'x'); }
  { std::ofstream(tree + "/file") << std::string(256 << 10, 'x'); }
  const DiskUsage alone = Measure(tree);
  ASSERT_EQ(symlink(outside.c_str(), (tree + "/to-outside").c_str()), 0);
  ASSERT_EQ(link((tree + "/file").c_str(), (tree + "/again").c_str()), 0);
  const DiskUsage linked = Measure(tree);
  EXPECT_LT(linked.bytes - alone.bytes, 64 << 10) << "the symbolic link itself, at most";
  EXPECT_EQ(linked.inodes, alone.inodes + 1) << "the symbolic link; the hard link is the file";
  // Two roots in one walk: what the first counted the second does not.
  DiskUsageWalk walk;
  walk.Add(tree);
  walk.Add(tree);
  EXPECT_EQ(walk.usage().bytes, linked.bytes);
}

TEST_F(FileTreeTest, RemovalGoesToTheBottomOfAnyNestingAndFollowsNoLink) {
  const std::string tree = dir_ + "/tree", outside = dir_ + "/outside";
  ASSERT_TRUE(std::filesystem::create_directories(tree));
  ASSERT_TRUE(std::filesystem::create_directories(outside));
  { std::ofstream(outside + "/keep") << "kept"; }
  ASSERT_EQ(symlink(outside.c_str(), (tree + "/to-outside").c_str()), 0);
  // 3,000 levels: more than the descriptors a process may have open (1,024 by default), which
  // std::filesystem::remove_all needs, one per level (it fails with EMFILE); the removal keeps at
  // most 64 open.
  ASSERT_TRUE(testing::MakeDeepTree(tree, 3000, 20, 4096));
  ASSERT_TRUE(RemoveTree(tree).ok());
  EXPECT_FALSE(std::filesystem::exists(tree));
  EXPECT_TRUE(std::filesystem::exists(outside + "/keep"));
  EXPECT_TRUE(RemoveTree(tree).ok()) << "gone already is fine";
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) left.push_back(e.path());
  EXPECT_THAT(left, ElementsAre(outside));
}

}  // namespace
}  // namespace weft
