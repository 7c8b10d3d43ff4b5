#include "train/command_event_reader.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/subprocess.h"
#include "train/command_files.h"

namespace weft::train {
namespace {

using Record = CommandEventRecord;
constexpr uint32_t kMetricsRecord = Record::kMetrics, kCheckpointRecord = Record::kCheckpoint,
                   kModelRecord = Record::kModel, kEnd = Record::kEnd;
constexpr uint32_t kEpochsTotal = Record::kEpochsTotal, kStepsTotal = Record::kStepsTotal,
                   kSamples = Record::kSamples, kTrainLoss = Record::kTrainLoss,
                   kSamplesPerS = Record::kSamplesPerS, kTestAccuracy = Record::kTestAccuracy,
                   kTestLoss = Record::kTestLoss, kFile = Record::kFile, kMore = Record::kMore;

constexpr int kSocketFd = 3, kWorkFd = 4, kExeFd = 5;  // the reader's descriptors
constexpr size_t kMaxBytesPerRead = 512 * 1024;        // of the metrics file, per Read
constexpr size_t kMaxRecordsPerRead = 65536;           // > kMaxBytesPerRead / 8 (`{"step":0}`)
constexpr int kEventsRefused = -2;                     // the metrics file is not a regular file

// --- The reader: weft-event-reader, as the job's uid ---

// "checkpoint" or "model": what an event that names a file announces.
const char* AnnouncedName(const CommandEvent& e) {
  return e.kind == CommandEvent::Kind::kModel ? "model" : "checkpoint";
}

bool SendRecord(int socket, const Record& r, int fd) {
  return SendCommandEventMessage(socket, &r, sizeof r, fd);
}

Record Encode(const CommandEvent& e) {
  Record r;
  r.type = e.kind == CommandEvent::Kind::kCheckpoint ? kCheckpointRecord
           : e.kind == CommandEvent::Kind::kModel    ? kModelRecord
                                                     : kMetricsRecord;
  r.step = e.step;
  r.epoch = e.epoch;
  auto put = [&r](const auto& field, uint32_t bit, auto* out) {
    if (!field) return;
    r.present |= bit;
    *out = *field;
  };
  put(e.epochs_total, kEpochsTotal, &r.epochs_total);
  put(e.steps_total, kStepsTotal, &r.steps_total);
  put(e.samples, kSamples, &r.samples);
  put(e.train_loss, kTrainLoss, &r.train_loss);
  put(e.samples_per_s, kSamplesPerS, &r.samples_per_s);
  put(e.test_accuracy, kTestAccuracy, &r.test_accuracy);
  put(e.test_loss, kTestLoss, &r.test_loss);
  r.path_bytes = static_cast<uint32_t>(std::min(e.path.size(), sizeof r.path));
  std::memcpy(r.path, e.path.data(), r.path_bytes);
  return r;
}

// The metrics file, read on from where the last read stopped, as the loop it replaced in
// weft-learner did.
class MetricsFile {
 public:
  MetricsFile(int work_fd, std::string work_dir, std::string rel)
      : work_fd_(work_fd), work_dir_(std::move(work_dir)), rel_(std::move(rel)) {}

  // Calls `emit` for each whole line's event, up to kMaxBytesPerRead bytes of the file; whether
  // more is there. False from `emit` (the event not taken) ends the read, and returns false.
  bool ReadSome(const std::function<bool(const CommandEvent&)>& emit, bool* more) {
    *more = false;
    if (!EmitLines(emit)) return false;  // whole lines a stopped read left
    if (!Open()) return true;
    char buf[1 << 16];
    for (size_t taken = 0; taken < kMaxBytesPerRead; taken += sizeof buf) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return true;
      partial_.append(buf, static_cast<size_t>(n));
      if (!EmitLines(emit)) return false;
    }
    *more = true;
    return true;
  }

 private:
  bool Open() {
    if (fd_ == kEventsRefused) return false;
    if (fd_ >= 0) return true;
    fd_ = OpenBeneath(work_fd_, rel_, O_RDONLY | O_NONBLOCK);
    struct stat st {};
    if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))) {
      spdlog::warn("WEFT_METRICS_FILE is not a regular file; ignored");
      ::close(fd_);
      fd_ = kEventsRefused;
    }
    return fd_ >= 0;
  }

  bool EmitLines(const std::function<bool(const CommandEvent&)>& emit) {
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      const absl::string_view line(partial_.data() + start, nl - start);
      ++lines_;
      if (line.empty()) continue;
      absl::StatusOr<CommandEvent> e = ParseCommandEvent(line, work_dir_);
      if (!e.ok()) {
        spdlog::warn("WEFT_METRICS_FILE line {} skipped: {}", lines_, e.status().message());
        continue;
      }
      if (!emit(*e)) {  // not taken: this line is read again by the next read
        partial_.erase(0, start);
        --lines_;
        return false;
      }
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxCommandEventBytes) {
      spdlog::warn("WEFT_METRICS_FILE line {} skipped: longer than {} bytes", lines_ + 1,
                   kMaxCommandEventBytes);
      partial_.clear();  // the rest of that line then fails to parse: skipped too
    }
    return true;
  }

  const int work_fd_;
  const std::string work_dir_, rel_;
  int fd_ = -1;
  std::string partial_;
  int64_t lines_ = 0;
};

bool SendEvent(int socket, int work_fd, const CommandEvent& e) {
  Record r = Encode(e);
  int fd = -1;
  if (e.kind != CommandEvent::Kind::kMetrics) {
    absl::StatusOr<int> opened = OpenAnnounced(work_fd, e.path, AnnouncedName(e));
    if (opened.ok()) {
      fd = *opened;
      r.present |= kFile;
    } else {
      spdlog::warn("{} (as the job's uid {})", opened.status().message(), ::getuid());
    }
  }
  const bool sent = SendRecord(socket, r, fd);
  if (fd >= 0) ::close(fd);
  return sent;
}

// --- weft-learner's side ---

absl::Status RangeError(const char* field) {
  return absl::InvalidArgumentError(absl::StrCat(field, " is out of its range"));
}

absl::Status CheckCount(const char* field, int64_t v, int64_t max) {
  return v >= 0 && v <= max ? absl::OkStatus() : RangeError(field);
}

absl::Status CheckNumber(const char* field, double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi ? absl::OkStatus() : RangeError(field);
}

// A record as an event, every field checked against the bounds the parser holds lines to.
absl::StatusOr<CommandEvent> Decode(const Record& r, const std::string& work_dir) {
  CommandEvent e;
  if (r.type == kCheckpointRecord) e.kind = CommandEvent::Kind::kCheckpoint;
  if (r.type == kModelRecord) e.kind = CommandEvent::Kind::kModel;
  if (r.type < kMetricsRecord || r.type > kModelRecord) return RangeError("type");
  if ((r.present & ~uint32_t{kFile * 2 - 1}) != 0) return RangeError("present");
  absl::Status s = CheckCount("step", r.step, kMaxCommandCount);
  if (s.ok()) s = CheckCount("epoch", r.epoch, kMaxCommandEpochs);
  if (s.ok()) s = CheckCount("epochs_total", r.epochs_total, kMaxCommandEpochs);
  if (s.ok()) s = CheckCount("steps_total", r.steps_total, kMaxCommandCount);
  if (s.ok()) s = CheckCount("samples", r.samples, kMaxCommandCount);
  if (s.ok()) s = CheckNumber("train_loss", r.train_loss, -kMaxCommandLoss, kMaxCommandLoss);
  if (s.ok()) s = CheckNumber("samples_per_s", r.samples_per_s, 0, kMaxCommandSamplesPerS);
  if (s.ok()) s = CheckNumber("test_accuracy", r.test_accuracy, 0, 1);
  if (s.ok()) s = CheckNumber("test_loss", r.test_loss, -kMaxCommandLoss, kMaxCommandLoss);
  if (!s.ok()) return s;
  e.step = r.step;
  e.epoch = static_cast<int>(r.epoch);
  if (r.present & kEpochsTotal) e.epochs_total = static_cast<int>(r.epochs_total);
  if (r.present & kStepsTotal) e.steps_total = r.steps_total;
  if (r.present & kSamples) e.samples = r.samples;
  if (r.present & kTrainLoss) e.train_loss = r.train_loss;
  if (r.present & kSamplesPerS) e.samples_per_s = r.samples_per_s;
  if (r.present & kTestAccuracy) e.test_accuracy = r.test_accuracy;
  if (r.present & kTestLoss) e.test_loss = r.test_loss;
  if (e.kind == CommandEvent::Kind::kModel && !e.test_accuracy) return RangeError("test_accuracy");
  const bool names_file = e.kind != CommandEvent::Kind::kMetrics;
  if (r.path_bytes > sizeof r.path || (r.path_bytes != 0) != names_file) return RangeError("path");
  if ((r.present & kFile) != 0 && !names_file) return RangeError("present");
  if (names_file) {
    e.path.assign(r.path, r.path_bytes);
    absl::StatusOr<std::string> rel = PathInsideWorkDir(e.path, work_dir);
    if (!rel.ok() || *rel != e.path) return RangeError("path");
  }
  return e;
}

// Receives one record and the descriptor that came with it (-1 if none). 0 at the end of the
// stream, -1 with errno set on an error, else the record's bytes.
ssize_t ReceiveRecord(int socket, Record* r, int* fd) {
  *fd = -1;
  iovec iov{r, sizeof *r};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  bool extra = (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      if (*fd < 0 && !extra) {
        *fd = got;
      } else {
        ::close(got);
        extra = true;
      }
    }
  }
  if (extra) {  // more than one descriptor, or a record cut short: not what the reader sends
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    errno = EPROTO;
    return -1;
  }
  return n;
}

void CloseAll(std::vector<ReadCommandEvent>& events) {
  for (ReadCommandEvent& e : events) {
    if (e.fd >= 0) ::close(e.fd);
  }
  events.clear();
}

}  // namespace

bool SendCommandEventMessage(int socket, const void* data, size_t bytes, int fd) {
  iovec iov{const_cast<void*>(data), bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  for (;;) {
    if (::sendmsg(socket, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes)) return true;
    if (errno != EINTR) return false;
  }
}

int RunCommandEventReader(int socket, int work_fd, const std::string& work_dir,
                          const std::string& metrics_rel) {
  MetricsFile file(work_fd, work_dir, metrics_rel);
  for (;;) {
    char request = 0;
    const ssize_t n = ::recv(socket, &request, 1, 0);
    if (n == 0) return 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    size_t sent = 0;
    bool more = false;
    const bool ok = file.ReadSome(
        [&](const CommandEvent& e) {
          return ++sent < kMaxRecordsPerRead && SendEvent(socket, work_fd, e);
        },
        &more);
    Record end;
    end.type = kEnd;
    if (more || !ok) end.present = kMore;
    if (!SendRecord(socket, end, -1)) return 1;
  }
}

absl::StatusOr<std::unique_ptr<CommandEventReader>> CommandEventReader::Start(const Options& o) {
  const int exe = ::open(o.reader_binary.c_str(), O_PATH | O_CLOEXEC);
  if (exe < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "weft-event-reader, which reads a command job's metrics as the job's uid, is not at ",
        o.reader_binary, " (", std::strerror(errno), "): it is installed beside weft-learner"));
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    ::close(exe);
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  // Everything the child needs, made before fork: after it the child only makes system calls.
  const std::string arg0 = "weft-event-reader";
  char* const argv[] = {const_cast<char*>(arg0.c_str()), const_cast<char*>(o.work_dir.c_str()),
                        const_cast<char*>(o.metrics_rel.c_str()), nullptr};
  char lang[] = "LANG=C.UTF-8";
  char* const envp[] = {lang, nullptr};
  const bool root = ::geteuid() == 0;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int s = ::fcntl(sv[1], F_DUPFD, 10), w = ::fcntl(o.work_fd, F_DUPFD, 10),
              x = ::fcntl(exe, F_DUPFD_CLOEXEC, 10);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (s < 0 || w < 0 || x < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(s, kSocketFd) < 0 ||
        ::dup2(w, kWorkFd) < 0 || ::dup3(x, kExeFd, O_CLOEXEC) < 0) {
      ::_exit(126);
    }
    if (::close_range(kExeFd + 1, ~0U, 0) != 0) ::_exit(126);  // no descriptor of ours leaks
    ::signal(SIGPIPE, SIG_DFL);                                // weft-learner ignores it
    if (root && (::setgroups(0, nullptr) != 0 || ::setresgid(o.gid, o.gid, o.gid) != 0 ||
                 ::setresuid(o.uid, o.uid, o.uid) != 0)) {
      ::_exit(126);
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(126);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    ::fexecve(kExeFd, argv, envp);
    ::_exit(127);
  }
  const int error = errno;
  ::close(sv[1]);
  ::close(exe);
  if (pid < 0) {
    ::close(sv[0]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(error)));
  }
  spdlog::info("reading the program's metrics in weft-event-reader, pid {}, uid {}", pid,
               root ? o.uid : ::getuid());
  return std::unique_ptr<CommandEventReader>(new CommandEventReader(pid, sv[0], o));
}

CommandEventReader::~CommandEventReader() {
  ::close(socket_);  // the reader's next recv sees the end and it exits
  int status = 0;
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
}

absl::Status CommandEventReader::Fail(const std::string& why) {
  failed_ = true;
  ::kill(pid_, SIGKILL);
  int status = 0;
  std::string ended;
  if (::waitpid(pid_, &status, 0) == pid_)
    ended = absl::StrCat("; it ", DescribeWaitStatus(status));
  return absl::UnavailableError(
      absl::StrCat("weft-event-reader (pid ", pid_, ") ", why, ended, " (see this log above)"));
}

absl::StatusOr<std::vector<ReadCommandEvent>> CommandEventReader::Read() {
  if (failed_) return absl::UnavailableError("weft-event-reader has failed");
  more_ = false;
  if (::send(socket_, "r", 1, MSG_NOSIGNAL) != 1) {
    return Fail(absl::StrCat("cannot be asked to read: ", std::strerror(errno)));
  }
  std::vector<ReadCommandEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{socket_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      CloseAll(events);
      return Fail(absl::StrCat("did not answer within ", o_.timeout_ms, " ms"));
    }
    Record r;
    int fd = -1;
    const ssize_t n = ReceiveRecord(socket_, &r, &fd);
    std::string problem;
    if (n <= 0) problem = n == 0 ? "ended" : absl::StrCat("cannot be read: ", std::strerror(errno));
    if (problem.empty() && n != static_cast<ssize_t>(sizeof r)) {
      problem = absl::StrCat("sent a record of ", n, " bytes, not ", sizeof r);
    }
    if (problem.empty() && r.type == kEnd) {
      if (fd < 0 && (r.present & ~uint32_t{kMore}) == 0) {
        more_ = (r.present & kMore) != 0;
        return events;
      }
      problem = "sent a malformed end record";
    }
    absl::StatusOr<CommandEvent> e = absl::UnknownError("not decoded");
    if (problem.empty()) {
      e = Decode(r, o_.work_dir);
      if (!e.ok()) problem = absl::StrCat("sent a bad record: ", e.status().message());
    }
    if (problem.empty() && ((r.present & kFile) != 0) != (fd >= 0)) problem = "sent a stray file";
    if (problem.empty() && events.size() >= kMaxRecordsPerRead) problem = "sent too many records";
    if (!problem.empty()) {
      if (fd >= 0) ::close(fd);
      CloseAll(events);
      return Fail(problem);
    }
    if (fd >= 0) {
      if (absl::Status s = CheckAnnounced(fd, e->path, AnnouncedName(*e)); !s.ok()) {
        spdlog::warn("{}", s.message());
        ::close(fd);
        fd = -1;
      }
    }
    events.push_back({*std::move(e), fd});
  }
}

}  // namespace weft::train
