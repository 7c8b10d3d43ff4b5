// A command job's metrics are read by weft-event-reader as the job's uid with no new privileges
// (issue 40: no root process parses tenant input): what that uid cannot read is never handed to
// root, and root accepts from the reader only records that check out field by field.
#include "train/command_event_reader.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace weft::train {
namespace {

using ::testing::HasSubstr;

// A uid of nobody's on this host, as weftd gives each job one of its own.
constexpr uid_t kJobUid = 1999000000 + 417;

class CommandEventReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/event-reader-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    work_ = root_ + "/work";
    ASSERT_EQ(::mkdir(work_.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((work_ + "/.weft").c_str(), 0700), 0);
    if (::geteuid() == 0) {
      ASSERT_EQ(::chown(work_.c_str(), kJobUid, kJobUid), 0);
      ASSERT_EQ(::chown((work_ + "/.weft").c_str(), kJobUid, kJobUid), 0);
    }
    work_fd_ = ::open(work_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(work_fd_, 0);
  }
  void TearDown() override {
    if (work_fd_ >= 0) ::close(work_fd_);
    std::filesystem::remove_all(root_);
  }

  CommandEventReader::Options Options(const std::string& binary, const std::string& metrics) {
    CommandEventReader::Options o;
    o.reader_binary = binary;
    o.work_fd = work_fd_;
    o.work_dir = work_;
    o.metrics_rel = metrics;
    o.uid = kJobUid;
    o.gid = kJobUid;
    return o;
  }
  // A file in WORK_DIR, as the program (the job's uid) would have written it.
  void Write(const std::string& rel, const std::string& text, bool own = true, int mode = 0600) {
    const std::string path = work_ + "/" + rel;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    if (own && ::geteuid() == 0) {
      ASSERT_EQ(::chown(path.c_str(), kJobUid, kJobUid), 0);
    }
  }
  static std::string Status(pid_t pid, const std::string& key) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(key + ":", 0) != 0) continue;
      const size_t first = line.find_first_not_of(" \t", key.size() + 1);
      const size_t last = line.find_last_not_of(" \t");
      return first == std::string::npos ? "" : line.substr(first, last + 1 - first);
    }
    return "";
  }
  static std::string Contents(int fd) {
    std::string out(256, '\0');
    const ssize_t n = ::pread(fd, out.data(), out.size(), 0);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }

  std::string root_, work_;
  int work_fd_ = -1;
};

const std::string kReader = std::string(WEFT_BIN_DIR) + "/weft-event-reader";

TEST_F(CommandEventReaderTest, ReadsAsTheJobsUidAndHandsOverOnlyWhatThatUidCanOpen) {
  if (::geteuid() != 0) GTEST_SKIP() << "the reader takes the job's uid only when started by root";
  Write("model.pt", "the program's model");
  Write("secret.pt", "root's secret", /*own=*/false);  // root's, 0600: not the job's to read
  auto reader = CommandEventReader::Start(Options(kReader, ".weft/metrics.jsonl"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto none = (*reader)->Read();  // no metrics file yet
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  const pid_t pid = (*reader)->pid();
  const std::string id = std::to_string(kJobUid);
  const std::string ids = id + "\t" + id + "\t" + id + "\t" + id;  // real, effective, saved, fs
  EXPECT_EQ(Status(pid, "Uid"), ids);
  EXPECT_EQ(Status(pid, "Gid"), ids);
  EXPECT_EQ(Status(pid, "Groups"), "");
  EXPECT_EQ(Status(pid, "NoNewPrivs"), "1");
  EXPECT_EQ(Status(pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(Status(pid, "CapPrm"), "0000000000000000");
  // Nothing of weft-learner's is open in it: stdin (/dev/null), the log, its socket, WORK_DIR.
  std::set<std::string> fds;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    fds.insert(e.path().filename().string());
  }
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2", "3", "4"}));

  Write(".weft/metrics.jsonl",
        "{\"step\": 10, \"epoch\": 1, \"train_loss\": 0.5}\n"
        "not json\n"
        "{\"step\": 11, \"model\": \"model.pt\", \"test_accuracy\": 0.8}\n"
        "{\"step\": 12, \"model\": \"secret.pt\", \"test_accuracy\": 0.9}\n"
        "{\"step\": 13, \"chec",
        true, 0644);
  auto events = (*reader)->Read();
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u) << "the bad line skipped, the partial one kept for later";
  EXPECT_EQ((*events)[0].event.kind, CommandEvent::Kind::kMetrics);
  EXPECT_EQ((*events)[0].event.step, 10);
  EXPECT_DOUBLE_EQ(*(*events)[0].event.train_loss, 0.5);
  EXPECT_EQ((*events)[0].fd, -1);
  EXPECT_EQ((*events)[1].event.path, "model.pt");
  ASSERT_GE((*events)[1].fd, 0);
  EXPECT_EQ(Contents((*events)[1].fd), "the program's model");
  EXPECT_EQ((*events)[2].event.path, "secret.pt");
  EXPECT_EQ((*events)[2].fd, -1) << "a file the job's uid cannot open never reaches root";
  for (const ReadCommandEvent& e : *events) {
    if (e.fd >= 0) ::close(e.fd);
  }

  std::ofstream(work_ + "/.weft/metrics.jsonl", std::ios::app) << "kpoint\": \"model.pt\"}\n";
  auto rest = (*reader)->Read();
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].event.kind, CommandEvent::Kind::kCheckpoint);
  EXPECT_EQ((*rest)[0].event.step, 13);
  if ((*rest)[0].fd >= 0) ::close((*rest)[0].fd);
  EXPECT_FALSE((*reader)->more());
}

TEST_F(CommandEventReaderTest, AFileOfManyLinesIsReadInBoundedReadsAndNoneIsLost) {
  std::string lines;
  for (int i = 0; i < 70000; ++i) lines += "{\"step\": " + std::to_string(i) + "}\n";
  Write(".weft/metrics.jsonl", lines, true, 0644);  // 1.1 MB: more than one read takes
  auto reader = CommandEventReader::Start(Options(kReader, ".weft/metrics.jsonl"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t next = 0;
  int reads = 0;
  do {
    auto events = (*reader)->Read();
    ASSERT_TRUE(events.ok()) << events.status();
    ++reads;
    for (const ReadCommandEvent& e : *events) ASSERT_EQ(e.event.step, next++);
  } while ((*reader)->more());
  EXPECT_EQ(next, 70000);
  EXPECT_GT(reads, 1);
}

TEST_F(CommandEventReaderTest, ARecordThatDoesNotCheckOutEndsTheReader) {
  const std::string hostile = std::string(WEFT_TEST_BIN_DIR) + "/hostile_event_reader";
  const std::pair<const char*, const char*> cases[] = {
      {"short", "record of 10 bytes"},
      {"nan-accuracy", "test_accuracy is out of its range"},
      {"negative-step", "step is out of its range"},
      {"stray-file", "stray file"},
      {"path-outside", "path is out of its range"},
      {"exit", "exited with status 3"},
      {"silent", "did not answer within 500 ms"},
  };
  for (const auto& [mode, problem] : cases) {
    CommandEventReader::Options o = Options(hostile, mode);
    o.timeout_ms = 500;
    auto reader = CommandEventReader::Start(o);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const pid_t pid = (*reader)->pid();
    auto events = (*reader)->Read();
    ASSERT_FALSE(events.ok()) << mode;
    EXPECT_EQ(events.status().code(), absl::StatusCode::kUnavailable) << mode;
    EXPECT_THAT(events.status().message(), HasSubstr(problem)) << mode;
    EXPECT_EQ(::kill(pid, 0), -1) << mode << ": the reader is killed and reaped";
    EXPECT_FALSE((*reader)->Read().ok()) << mode << ": and stays failed";
  }
  CommandEventReader::Options o = Options(hostile, "good");  // the stand-in itself works
  auto reader = CommandEventReader::Start(o);
  ASSERT_TRUE(reader.ok());
  auto events = (*reader)->Read();
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), 1u);
}

TEST_F(CommandEventReaderTest, AMissingReaderIsSaidAtStart) {
  auto reader = CommandEventReader::Start(Options(root_ + "/no-such-reader", "m"));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reader.status().message(), HasSubstr("installed beside weft-learner"));
}

}  // namespace
}  // namespace weft::train
