// What kind of image archive a file is, read from its tar headers: made here with GNU tar (plain
// and gzipped, ustar and GNU long names), and a file that is not a tar archive at all.
#include "control/image_archive.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

namespace weft {
namespace {

class ImageArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-archive-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A tar archive of `files` (paths relative to a fresh directory), made with `flags`.
  std::string Tar(const std::string& name, const std::vector<std::string>& files,
                  const std::string& flags = "-cf") {
    const std::string root = dir_ + "/" + name + ".d";
    std::string list;
    for (const std::string& f : files) {
      std::filesystem::create_directories(std::filesystem::path(root + "/" + f).parent_path());
      std::ofstream(root + "/" + f) << "x";
      list += " '" + f + "'";
    }
    const std::string out = dir_ + "/" + name;
    const std::string cmd = "tar " + flags + " '" + out + "' -C '" + root + "'" + list;
    EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
    return out;
  }
  std::string dir_;
};

TEST_F(ImageArchiveTest, EachKindIsKnownByItsTop) {
  EXPECT_EQ(*ImageArchiveFormat(Tar("oci.tar", {"oci-layout", "index.json", "blobs/sha256/ab"})),
            kOciArchive);
  EXPECT_EQ(*ImageArchiveFormat(Tar("docker.tar", {"manifest.json", "abc/layer.tar"})),
            kDockerArchive);
  EXPECT_EQ(*ImageArchiveFormat(Tar("rootfs.tar", {"usr/bin/python3", "etc/passwd"})),
            kRootfsArchive);
  EXPECT_EQ(*ImageArchiveFormat(Tar("rootfs.tar.gz", {"bin/sh"}, "-czf")), kRootfsArchive);
  // Names past ustar's 100 characters (GNU's long-name entries) and a leading "./".
  const std::string deep = "etc/" + std::string(150, 'a');
  EXPECT_EQ(*ImageArchiveFormat(Tar("long.tar", {deep})), kRootfsArchive);
  const std::string dotted = dir_ + "/dotted.tar";
  std::filesystem::create_directories(dir_ + "/dot.d/usr");
  ASSERT_EQ(system(("tar -cf '" + dotted + "' -C '" + dir_ + "/dot.d' ./usr").c_str()), 0);
  EXPECT_EQ(*ImageArchiveFormat(dotted), kRootfsArchive);
}

TEST_F(ImageArchiveTest, WhatIsNotAnImageSaysWhy) {
  std::ofstream(dir_ + "/notes.txt") << "not an archive";
  auto text = ImageArchiveFormat(dir_ + "/notes.txt");
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_NE(text.status().message().find("is not a tar archive"), std::string::npos);
  std::ofstream(dir_ + "/zeros", std::ios::binary) << std::string(4096, 'z');
  EXPECT_NE(ImageArchiveFormat(dir_ + "/zeros").status().message().find("no ustar header"),
            std::string::npos);
  auto code = ImageArchiveFormat(Tar("code.tar.gz", {"train.py", "weft_job.py"}, "-czf"));
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find("not an image"), std::string::npos);
  EXPECT_NE(code.status().message().find("train.py"), std::string::npos) << "says what it holds";
  EXPECT_TRUE(absl::IsNotFound(ImageArchiveFormat(dir_ + "/missing").status()));
}

}  // namespace
}  // namespace weft
