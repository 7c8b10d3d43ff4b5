// Container images end to end through a real weftd, the CLI and podman: a tenant imports its own
// OCI archive (made here with podman from a root file system holding one static program), runs a
// command job on it, and another tenant can neither see it nor name it; the admin's image from a
// file on weftd's host is granted to the tenants it names; an image without what a job needs
// fails the job at once with the reason; and what is not an image, an unknown name and an image
// past the tenant's disk quota are refused with the field and the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "integration/weftd_test.h"
#include "nlohmann/json.hpp"

namespace weft {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A program that needs nothing of its image: it says hello and hands back a model.
constexpr char kProgram[] = R"(#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
  FILE* m = fopen("model.txt", "w");
  fputs("m", m);
  fclose(m);
  FILE* f = fopen(getenv("WEFT_METRICS_FILE"), "a");
  fputs("{\"model\": \"model.txt\", \"test_accuracy\": 0.5, \"step\": 1}\n", f);
  fclose(f);
  printf("hello from the tenant's own image, uid %d\n", (int)getuid());
  return 0;
}
)";

class ImagesTest : public testing::WeftdTest {
 protected:
  testing::WeftdTestOptions Options() const override {
    testing::WeftdTestOptions o("images");
    o.containers = true;
    return o;
  }
  void SetUp() override {
    WeftdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    MakeArchives();
  }
  testing::CommandResult Run(const std::vector<std::string>& argv) {
    return testing::RunCommand(argv,
                               {"CONTAINERS_CONF=" + dir_ + "/data/run/podman/containers.conf"});
  }
  // rootfs.tar: /prog (static) and an etc; tiny-oci.tar: the same as an OCI archive.
  void MakeArchives() {
    const std::string root = dir_ + "/rootfs";
    std::filesystem::create_directories(root + "/etc");
    Write("rootfs/etc/hostname", "tiny\n");
    // 1.5 MiB that does not compress: the image is large enough to pass a small quota.
    std::string noise(3 << 19, '\0');
    uint64_t x = 88172645463325252ull;
    for (char& c : noise) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    std::ofstream(root + "/etc/noise", std::ios::binary) << noise;
    auto cc =
        Run({"/usr/bin/gcc", "-static", "-O2", "-o", root + "/prog", Write("prog.c", kProgram)});
    ASSERT_EQ(cc.exit_code, 0) << cc.output;
    // With its top directory ("."): a root file system's own mode comes from it, and its
    // container's uid must be able to look inside.
    for (const std::string& d : {root, root + "/etc"}) {
      std::filesystem::permissions(
          d, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                 std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                 std::filesystem::perms::others_exec);
    }
    ASSERT_EQ(Run({"/usr/bin/tar", "-cf", dir_ + "/rootfs.tar", "-C", root, "."}).exit_code, 0);
    tag_ = "localhost/weft-images-test/tiny:" + std::to_string(getpid());
    auto imported = Run({"/usr/bin/podman", "import", "--quiet", dir_ + "/rootfs.tar", tag_});
    ASSERT_EQ(imported.exit_code, 0) << imported.output;
    auto saved = Run({"/usr/bin/podman", "save", "--quiet", "--format", "oci-archive", "-o",
                      dir_ + "/tiny-oci.tar", tag_});
    ASSERT_EQ(saved.exit_code, 0) << saved.output;
    Run({"/usr/bin/podman", "rmi", tag_});
    std::filesystem::create_directories(dir_ + "/code");
    Write("code/README", "nothing to unpack but this\n");
    ASSERT_EQ(Run({"/usr/bin/tar", "-czf", dir_ + "/code.tar.gz", "-C", dir_ + "/code", "README"})
                  .exit_code,
              0);
  }
  // A command job of `token` running `command` on `image`.
  testing::CommandResult SubmitOn(const std::string& token, const std::string& image,
                                  const std::string& command) {
    const std::string manifest =
        Write("job-" + image + ".yaml",
              "name: on-image\ncommand: " + command + "\ncode: code\n" + "image: " + image + "\n");
    return weftd_->CliAs(token, {"submit", manifest, "--upload", "code=" + dir_ + "/code.tar.gz"});
  }

  // The name this process gave the archive's image in podman, and took away once it was saved
  // (the process id: ctest runs the other tests of this file at the same time, with their own).
  std::string tag_;
};

TEST_F(ImagesTest, ATenantsOwnImageRunsItsJobAndNoOtherTenantCanSeeOrNameIt) {
  const std::string acme = NewTenant("acme"), other = NewTenant("other");
  auto add = weftd_->CliAs(acme, {"image", "add", "tiny", "--from", dir_ + "/tiny-oci.tar"});
  ASSERT_EQ(add.exit_code, 0) << add.output;
  EXPECT_THAT(add.output, HasSubstr("added image tiny (oci-archive"));
  auto list = weftd_->CliAs(acme, {"image", "list"});
  EXPECT_THAT(list.output, HasSubstr("tiny"));
  // The archive's own name (localhost/weft-images-test/tiny:<pid>) was not given to it.
  EXPECT_THAT(Run({"/usr/bin/podman", "images", "--format", "{{.Repository}}:{{.Tag}}"}).output,
              Not(HasSubstr(tag_)));

  // Another tenant: the image does not exist for it.
  EXPECT_THAT(weftd_->CliAs(other, {"image", "list"}).output, Not(HasSubstr("tiny")));
  auto show = weftd_->CliAs(other, {"image", "show", "tiny"});
  EXPECT_NE(show.exit_code, 0);
  EXPECT_THAT(show.output, HasSubstr("no image 'tiny'"));
  auto refused = SubmitOn(other, "tiny", "[/prog]");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("image: no image 'tiny'"));

  // Its own job runs on it: a program its image has, and weft's runtime image has not.
  auto sub = SubmitOn(acme, "tiny", "[/prog]");
  ASSERT_EQ(sub.exit_code, 0) << sub.output;
  const std::string id = testing::SubmittedJobId(sub.output);
  weftd_->set_token(acme);
  const json done = weftd_->WaitForJob(id, {"COMPLETED", "FAILED"}, 180);
  EXPECT_EQ(done.value("state", ""), "COMPLETED") << done.dump(2);
  EXPECT_THAT(weftd_->LearnerLog(id, 0), HasSubstr("hello from the tenant's own image"));

  // A job whose image lacks what it runs fails at once, saying so: no restart loop.
  auto py = SubmitOn(acme, "tiny", "[python3, train.py]");
  ASSERT_EQ(py.exit_code, 0) << py.output;
  const json failed =
      weftd_->WaitForJob(testing::SubmittedJobId(py.output), {"COMPLETED", "FAILED"}, 180);
  EXPECT_EQ(failed.value("state", ""), "FAILED") << failed.dump(2);
  EXPECT_EQ(failed.value("attempt", 0), 1);
  EXPECT_THAT(testing::HistoryText(failed), HasSubstr("'python3' cannot be run in the image"));

  // Deleted, it is gone for its tenant too.
  ASSERT_EQ(weftd_->CliAs(acme, {"image", "delete", "tiny"}).exit_code, 0);
  EXPECT_NE(weftd_->CliAs(acme, {"image", "show", "tiny"}).exit_code, 0);
}

TEST_F(ImagesTest, TheAdminsImageIsGrantedToTheTenantsItNames) {
  const std::string acme = NewTenant("acme"), other = NewTenant("other");
  auto add = weftd_->CliAs(weftd_->admin_token(), {"image", "add", "base", "--path",
                                                   dir_ + "/rootfs.tar", "--tenants", "acme"});
  ASSERT_EQ(add.exit_code, 0) << add.output;
  EXPECT_THAT(add.output, HasSubstr("(rootfs"));
  EXPECT_THAT(add.output, HasSubstr("for tenants acme"));
  EXPECT_THAT(weftd_->CliAs(acme, {"image", "list"}).output, HasSubstr("admin"));
  EXPECT_THAT(weftd_->CliAs(other, {"image", "list"}).output, Not(HasSubstr("base")));
  auto sub = SubmitOn(acme, "base", "[/prog]");
  ASSERT_EQ(sub.exit_code, 0) << sub.output;
  weftd_->set_token(acme);
  const json done =
      weftd_->WaitForJob(testing::SubmittedJobId(sub.output), {"COMPLETED", "FAILED"}, 180);
  EXPECT_EQ(done.value("state", ""), "COMPLETED")
      << testing::HistoryText(done) << weftd_->LearnerLog(done.value("id", ""), 0);
  // A tenant cannot register from weftd's host, nor remove the admin's.
  auto path = weftd_->CliAs(
      acme, {"image", "add", "mine", "--path", dir_ + "/rootfs.tar", "--tenants", "all"});
  EXPECT_NE(path.exit_code, 0);
  EXPECT_THAT(path.output, HasSubstr("only the admin registers an image from a file"));
  EXPECT_NE(weftd_->CliAs(acme, {"image", "delete", "base"}).exit_code, 0);
  // The admin can, and the engine forgets it (no test leaves an image behind).
  EXPECT_EQ(weftd_->CliAs(weftd_->admin_token(), {"image", "delete", "base"}).exit_code, 0);
}

TEST_F(ImagesTest, WhatIsNotAnImageAnUnknownNameAndAnImagePastTheQuotaAreRefused) {
  const std::string acme = NewTenant("acme");
  auto text = weftd_->CliAs(acme, {"image", "add", "notes", "--from", Write("notes.txt", "hi")});
  EXPECT_NE(text.exit_code, 0);
  EXPECT_THAT(text.output, HasSubstr("artifact: 'image-notes' is not a tar archive"));
  auto plain = weftd_->CliAs(acme, {"image", "add", "code", "--from", dir_ + "/code.tar.gz"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.output, HasSubstr("is a tar archive but not an image"));
  auto unknown = SubmitOn(acme, "nowhere", "[/prog]");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("image: no image 'nowhere'"));
  // An image counts against its tenant's disk quota: the archive (uploaded, under the quota)
  // and the image together are over it.
  const int64_t archive = static_cast<int64_t>(std::filesystem::file_size(dir_ + "/tiny-oci.tar"));
  const std::string small = NewTenant("small");
  const int64_t quota_mib = archive * 3 / 2 / (1 << 20);
  ASSERT_GE(quota_mib << 20, archive) << "the upload itself must fit";
  ASSERT_LT(quota_mib << 20, 2 * archive) << "the upload and the image together must not";
  ASSERT_EQ(weftd_
                ->CliAs(weftd_->admin_token(), {"tenant", "update", "small", "--disk-quota",
                                                std::to_string(quota_mib) + "MiB"})
                .exit_code,
            0);
  auto over = weftd_->CliAs(small, {"image", "add", "tiny", "--from", dir_ + "/tiny-oci.tar"});
  EXPECT_NE(over.exit_code, 0);
  EXPECT_THAT(over.output, HasSubstr("disk quota")) << over.output;
}

}  // namespace
}  // namespace weft
