#include "control/kernel_choices.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/files.h"
#include "job/kernel_cache.h"

namespace weft {
namespace {

class KernelChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-kernel-choices-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    layout_ = std::make_unique<JobLayout>(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Job `id`'s log directory, made, and the path of its kernels.tsv.
  std::string JobFile(const std::string& id) const {
    std::filesystem::create_directories(layout_->LogDir(id));
    return KernelCachePath(layout_->LogDir(id));
  }
  std::string dir_;
  std::unique_ptr<JobLayout> layout_;
};

TEST_F(KernelChoicesTest, ATenantsJobsPassOnTheirWellFormedChoicesAndNoOtherTenantGetsThem) {
  std::ofstream(JobFile("j1")) << "cpu | [64, 784] -> 32\tblas\nno tab here\n"
                               << "cpu | [64, 32] -> 10\tgpu\ncpu |\x01 bad\tonednn\n";
  KeepKernelChoices(*layout_, "team-a", "j1");
  const std::string kept = layout_->TenantKernelCachePath("team-a");
  EXPECT_EQ(ReadFile(kept).value_or(""), "cpu | [64, 784] -> 32\tblas\n")
      << "only the well-formed line is kept";
  struct stat st {};
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const std::string j2 = JobFile("j2");
  SeedKernelChoices(*layout_, "team-a", "j2");
  EXPECT_EQ(KernelCache::Load(j2).Find("cpu | [64, 784] -> 32"), "blas");
  const std::string j3 = JobFile("j3");
  SeedKernelChoices(*layout_, "team-b", "j3");
  EXPECT_FALSE(std::filesystem::exists(j3)) << "team-b has no choices of its own yet";

  // A later job's timing of the same shape wins.
  std::ofstream(JobFile("j4")) << "cpu | [64, 784] -> 32\tonednn\n";
  KeepKernelChoices(*layout_, "team-a", "j4");
  EXPECT_EQ(KernelCache::Load(kept).Find("cpu | [64, 784] -> 32"), "onednn");
}

TEST_F(KernelChoicesTest, ALinkOrAFifoInAJobsLogsIsNotReadAndDoesNotBlock) {
  // The job's learners own its log directory: in place of kernels.tsv they may leave a symbolic
  // link to a file weftd can read and they cannot, or a FIFO that would block a reader.
  const std::string outside = dir_ + "/secret.tsv";
  std::ofstream(outside) << "cpu | [1] -> 1\tblas\n";
  std::filesystem::create_symlink(outside, JobFile("linked"));
  KeepKernelChoices(*layout_, "team-a", "linked");
  ASSERT_EQ(::mkfifo(JobFile("fifo").c_str(), 0600), 0);
  KeepKernelChoices(*layout_, "team-a", "fifo");  // returns: the FIFO is not read
  EXPECT_FALSE(std::filesystem::exists(layout_->TenantKernelCachePath("team-a")));
}

}  // namespace
}  // namespace weft
