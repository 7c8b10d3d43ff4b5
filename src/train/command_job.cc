#include "train/command_job.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "job/layout.h"
#include "job/learner_contract.h"
#include "nlohmann/json.hpp"
#include "train/command_event_reader.h"
#include "train/command_events.h"
#include "train/command_files.h"
#include "train/command_process.h"
#include "train/target_tracker.h"

namespace weft::train {
namespace {

constexpr int64_t kStopGraceMs = 8000;  // SIGTERM -> SIGKILL; under the executor's 10 s
constexpr int kPollMs = 100;
constexpr char kChannelDir[] = ".weft";
constexpr char kProgramPath[] = "/usr/local/bin:/usr/bin:/bin";  // the program's PATH

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

class CommandJob {
 public:
  CommandJob(const LoopOptions& o, Reporter& r)
      : o_(o),
        l_(o.learner),
        spec_(o.spec),
        reporter_(r),
        sandbox_(true),
        targets_(spec_.targets) {}
  ~CommandJob() {
    reader_.reset();
    if (work_fd_ >= 0) ::close(work_fd_);
  }

  absl::StatusOr<LoopResult> Run();

 private:
  absl::Status PrepareWorkDir();
  absl::Status LetTheCommandUserReach(const std::string& root) const;
  absl::Status CopyResumeCheckpoint();
  absl::Status CopyOwnDataSet();
  absl::Status Unpack();
  absl::StatusOr<pid_t> GangNetwork();
  std::vector<std::string> ProgramEnvironment() const;
  CommandProcessOptions ProcessOptions(std::vector<std::string> argv) const;
  absl::StatusOr<std::unique_ptr<CommandProcess>> Start(CommandProcessOptions po);
  // Supervises the program until it ends or must stop; its wait status, or nullopt if stopped.
  std::optional<int> Supervise(CommandProcess& p);
  bool StopRequested() const {
    return (o_.stop_requested && o_.stop_requested->load()) || !reporter_.KeepRunning();
  }
  absl::Status StartReader();
  void ReadEvents();
  // `fd`: the announced checkpoint or model as the reader opened it, or -1; not closed here.
  void OnEvent(const CommandEvent& e, int fd);
  absl::Status OnCheckpoint(const CommandEvent& e, int fd);
  absl::Status OnModel(const CommandEvent& e, int fd);
  absl::Status CommitModel(const std::string& kind, const std::string& model_path,
                           const CommandEvent& e, int64_t bytes);
  std::string CandidatePath() const {
    return ModelDir(l_.result_dir, kFinalModel) + "/candidate.pt";
  }
  // Whether the program runs in a container of its job's (weftd's podman runtime).
  bool InContainer() const { return container_ != nullptr; }
  // Who the program runs as: the job's uid under a runtime of weftd's, else CommandUser().
  std::pair<uid_t, gid_t> User() const {
    if (!l_.program_container.runtime.empty()) {
      return {l_.program_container.uid, l_.program_container.uid};
    }
    return CommandUser();
  }
  absl::StatusOr<std::unique_ptr<CommandProcess>> StartInContainer(const CommandProcessOptions& po,
                                                                   const std::string& image,
                                                                   const std::string& what);
  absl::StatusOr<LoopResult> Finish(int status);

  const LoopOptions& o_;
  const LearnerLaunch& l_;
  const JobSpec& spec_;
  Reporter& reporter_;
  bool sandbox_;
  std::unique_ptr<PodmanRuntime> container_;  // set when the program runs in a container
  int work_fd_ = -1;
  std::string resume_path_;  // the copy of the checkpoint to resume from, in WORK_DIR
  std::string data_dir_;     // DATA_DIR as the program sees it
  // The metrics file's reader, of the job's uid, and how it failed if it did.
  std::unique_ptr<CommandEventReader> reader_;
  absl::Status reader_status_;
  ProgressReport progress_;
  // The program's evaluations; a model it announces is the delivered one when it meets `deliver`.
  TargetTracker targets_;
  std::optional<CommandEvent> candidate_;  // the last model announced: the final one on success
};

absl::Status CommandJob::PrepareWorkDir() {
  if (l_.work_dir.empty() || l_.model_dir.empty()) {
    return absl::InvalidArgumentError("WORK_DIR and MODEL_DIR must be set for a command job");
  }
  const std::string root = std::filesystem::path(l_.work_dir).parent_path();
  std::error_code ec;
  std::filesystem::remove_all(l_.work_dir, ec);  // never follows a link the program left
  RETURN_IF_ERROR(MakeDirs(root));
  if (::mkdir(l_.work_dir.c_str(), 0700) != 0) return Errno(absl::StrCat("mkdir ", l_.work_dir));
  work_fd_ = ::open(l_.work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (work_fd_ < 0) return Errno(absl::StrCat("open ", l_.work_dir));
  const auto [uid, gid] = User();
  if (::fchown(work_fd_, uid, gid) != 0) return Errno("fchown WORK_DIR");
  if (::mkdirat(work_fd_, kChannelDir, 0700) != 0) return Errno("mkdir WORK_DIR/.weft");
  if (::fchownat(work_fd_, kChannelDir, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("chown WORK_DIR/.weft");
  }
  RETURN_IF_ERROR(CopyResumeCheckpoint());
  return CopyOwnDataSet();
}

// Unsandboxed, as root, the program runs as nobody, who must be able to reach WORK_DIR: the
// directories from weftd's data directory down to `root` get search permission for others (o+x:
// names inside can be looked up, not listed; every file in them stays owner-only). The data
// directory's own parents must let nobody through already.
absl::Status CommandJob::LetTheCommandUserReach(const std::string& root) const {
  if (::geteuid() != 0 || l_.private_dir.empty()) return absl::OkStatus();
  if (root.rfind(l_.private_dir + "/", 0) != 0) return absl::OkStatus();
  std::string dir = l_.private_dir;
  std::string_view rest = std::string_view(root).substr(dir.size());
  for (;;) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return Errno(dir);
    if ((st.st_mode & S_IXOTH) == 0 && ::chmod(dir.c_str(), (st.st_mode & 07777) | S_IXOTH) != 0) {
      return Errno(absl::StrCat("chmod o+x ", dir));
    }
    if (rest.empty()) return absl::OkStatus();
    const size_t next = rest.find('/', 1);
    dir += std::string(rest.substr(0, next));
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
  }
}

absl::Status CommandJob::CopyResumeCheckpoint() {
  // The newest committed checkpoint, copied where the program (as its own user) can read it.
  for (const std::string& path : reporter_.ResumeFrom()) {
    int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0) {
      spdlog::warn("cannot open checkpoint {}: {}", path, std::strerror(errno));
      continue;
    }
    const std::string dest = absl::StrCat(l_.work_dir, "/", kChannelDir, "/resume.pt");
    absl::StatusOr<int64_t> n = CopyDurably(in, dest, kMaxCommandFileBytes, User().first);
    ::close(in);
    if (!n.ok()) return n.status();
    resume_path_ = dest;
    spdlog::info("resuming from checkpoint {} ({} bytes): WEFT_RESUME_FROM={}", path, *n, dest);
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// A data set the admin registered is bound read-only where it is. The job's own (data.artifact)
// lies in weftd's data directory, owner-only: it is copied to WORK_DIR/.weft/data for the
// program's user, like the resume checkpoint.
absl::Status CommandJob::CopyOwnDataSet() {
  data_dir_ = l_.data_dir;
  if (l_.data_dir.empty() || l_.private_dir.empty() ||
      l_.data_dir.rfind(l_.private_dir + "/", 0) != 0) {
    return absl::OkStatus();
  }
  const std::string dir = absl::StrCat(l_.work_dir, "/", kChannelDir, "/data");
  if (::mkdir(dir.c_str(), 0700) != 0) return Errno(absl::StrCat("mkdir ", dir));
  const auto [uid, gid] = User();
  if (::chown(dir.c_str(), uid, gid) != 0) return Errno(absl::StrCat("chown ", dir));
  const std::string from = TensorFilePath(l_.data_dir);
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return Errno(absl::StrCat("cannot open the job's data set ", from));
  absl::StatusOr<int64_t> n = CopyDurably(in, TensorFilePath(dir), kMaxCommandFileBytes, uid);
  ::close(in);
  if (!n.ok()) return n.status();
  data_dir_ = dir;
  return absl::OkStatus();
}

std::vector<std::string> CommandJob::ProgramEnvironment() const {
  namespace e = learner_env;
  std::vector<std::string> env = {
      absl::StrCat("PATH=", kProgramPath),
      absl::StrCat("HOME=", l_.work_dir),
      "LANG=C.UTF-8",
      "TMPDIR=/tmp",
      "PYTHONUNBUFFERED=1",
      absl::StrCat(e::kJobId, "=", l_.job_id),
      absl::StrCat(e::kAttempt, "=", l_.attempt),
      absl::StrCat(e::kRank, "=", l_.rank),
      absl::StrCat(e::kLocalRank, "=", l_.rank),
      absl::StrCat(e::kWorldSize, "=", l_.world_size),
      absl::StrCat(e::kLearnerId, "=", l_.rank + 1),
      absl::StrCat(e::kNumLearners, "=", l_.world_size),
      absl::StrCat(e::kThreads, "=", l_.threads),
      absl::StrCat(e::kWorkDir, "=", l_.work_dir),
      absl::StrCat("WEFT_METRICS_FILE=", l_.work_dir, "/", kChannelDir, "/metrics.jsonl"),
  };
  if (!l_.rendezvous_host.empty()) {
    env.push_back(absl::StrCat(e::kMasterAddr, "=", l_.rendezvous_host));
    env.push_back(absl::StrCat(e::kMasterPort, "=", l_.rendezvous_port));
    // The gang's network in the sandbox has loopback only; say so to Gloo, which otherwise
    // warns that the sandbox's host name does not resolve.
    if (sandbox_) env.push_back("GLOO_SOCKET_IFNAME=lo");
  }
  if (!data_dir_.empty()) {
    env.push_back(absl::StrCat(e::kDataDir, "=", data_dir_));
    env.push_back(absl::StrCat(e::kDataFormat, "=", l_.data_format));
  }
  if (!l_.gpus.empty()) {
    // In a container the program sees only its devices, numbered from 0 by CUDA.
    std::vector<int> visible = l_.gpus;
    if (InContainer()) std::iota(visible.begin(), visible.end(), 0);
    env.push_back(absl::StrCat(e::kGpus, "=", absl::StrJoin(l_.gpus, ",")));
    env.push_back(absl::StrCat(e::kCudaVisibleDevices, "=", absl::StrJoin(visible, ",")));
  }
  if (!resume_path_.empty()) env.push_back(absl::StrCat("WEFT_RESUME_FROM=", resume_path_));
  if (spec_.targets.deliver) {
    env.push_back(absl::StrCat("WEFT_TARGET_DELIVER=", *spec_.targets.deliver));
  }
  if (spec_.targets.complete) {
    env.push_back(absl::StrCat("WEFT_TARGET_COMPLETE=", *spec_.targets.complete));
  }
  return env;
}

CommandProcessOptions CommandJob::ProcessOptions(std::vector<std::string> argv) const {
  CommandProcessOptions po;
  po.argv = std::move(argv);
  po.env = ProgramEnvironment();
  po.work_dir = l_.work_dir;
  // A registered data set is bound read-only; the job's own lies in WORK_DIR (CopyOwnDataSet).
  if (!data_dir_.empty() && data_dir_ == l_.data_dir) po.read_only_dirs.push_back(data_dir_);
  po.private_dir = l_.private_dir;
  po.sandbox = sandbox_;
  // weftd --runtime bwrap: the job's uid, and the network namespace of the job's attempt.
  if (l_.program_container.runtime == "bwrap") {
    po.uid = l_.program_container.uid;
    po.network_namespace = l_.program_container.network_namespace;
    po.pids_limit = l_.program_container.pids_limit;
  }
  return po;
}

absl::StatusOr<std::unique_ptr<CommandProcess>> CommandJob::Start(CommandProcessOptions po) {
  absl::StatusOr<std::unique_ptr<CommandProcess>> p = CommandProcess::Start(po);
  if (p.ok() || !absl::IsFailedPrecondition(p.status()) || l_.sandbox_required) return p;
  spdlog::warn("{}; running the command WITHOUT the sandbox (weftd --allow-unsandboxed-commands)",
               p.status().message());
  sandbox_ = false;
  po.sandbox = false;
  po.join_network_of = 0;
  RETURN_IF_ERROR(LetTheCommandUserReach(std::filesystem::path(l_.work_dir).parent_path()));
  return CommandProcess::Start(po);
}

absl::Status CommandJob::Unpack() {
  const std::string archive = CodeArchivePath(l_.model_dir);
  int in = ::open(archive.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Errno(absl::StrCat("code: cannot open ", archive));
  CommandProcessOptions po = ProcessOptions(
      {"tar", "--extract", "--gzip", "--file=-", "--no-same-owner", "--no-same-permissions",
       "--delay-directory-restore", "--warning=no-timestamp"});
  po.stdin_fd = in;
  // In a container tar runs on weft's runtime image (the job's may have none).
  absl::StatusOr<std::unique_ptr<CommandProcess>> tar =
      InContainer() ? StartInContainer(po, l_.program_container.runtime_image, "unpack")
                    : Start(po);
  ::close(in);
  if (!tar.ok()) return tar.status();
  const int status = (*tar)->Wait();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("code: the artifact '", spec_.code, "' does not unpack as a .tar.gz: tar ",
                     DescribeWaitStatus(status), " (its message is above in this log)"));
  }
  spdlog::info("unpacked the code artifact '{}' into {}{}", spec_.code, l_.work_dir,
               InContainer() ? " (in a container)"
               : sandbox_    ? " (in the sandbox)"
                             : "");
  return absl::OkStatus();
}

// Rank 0's program makes the gang's network namespace; the others join it. Where rank 0 says
// its pid is a file of weft-learner's own, outside every WORK_DIR.
absl::StatusOr<pid_t> CommandJob::GangNetwork() {
  // A container joins the namespace the executor made for the attempt (ProgramContainer).
  if (l_.world_size <= 1 || l_.rank == 0 || !sandbox_ || !l_.program_container.runtime.empty()) {
    return 0;
  }
  const std::string root = std::filesystem::path(l_.work_dir).parent_path();
  const std::string file = absl::StrCat(root, "/network-", l_.attempt, ".pid");
  const auto deadline = SystemClock::Get().NowMs() + o_.rendezvous_timeout_ms;
  while (SystemClock::Get().NowMs() < deadline && !StopRequested()) {
    if (absl::StatusOr<std::string> text = ReadFile(file); text.ok()) {
      int pid = 0;
      if (absl::SimpleAtoi(*text, &pid) && pid > 1) return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  return absl::UnavailableError("rank 0's program did not start in time");
}

// weft-event-reader, beside this program: it opens and parses what the program writes, with the
// job's rights (train/command_event_reader.h).
absl::Status CommandJob::StartReader() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Errno("readlink /proc/self/exe");
  CommandEventReader::Options ro;
  ro.reader_binary = absl::StrCat(
      std::filesystem::path(std::string(self, static_cast<size_t>(n))).parent_path().string(),
      "/weft-event-reader");
  ro.work_fd = work_fd_;
  ro.work_dir = l_.work_dir;
  ro.metrics_rel = absl::StrCat(kChannelDir, "/metrics.jsonl");
  std::tie(ro.uid, ro.gid) = User();
  ASSIGN_OR_RETURN(reader_, CommandEventReader::Start(ro));
  return absl::OkStatus();
}

// What the program appended to its metrics file since the last call. A reader that fails ends
// the supervision (reader_status_).
void CommandJob::ReadEvents() {
  if (!reader_ || !reader_status_.ok()) return;
  absl::StatusOr<std::vector<ReadCommandEvent>> events = reader_->Read();
  if (!events.ok()) {
    reader_status_ = events.status();
    spdlog::error("{}", reader_status_.message());
    return;
  }
  for (const ReadCommandEvent& e : *events) {
    OnEvent(e.event, e.fd);
    if (e.fd >= 0) ::close(e.fd);
  }
}

void CommandJob::OnEvent(const CommandEvent& e, int fd) {
  progress_.step = e.step;
  progress_.epoch = e.epoch;
  if (e.epochs_total) progress_.epochs_total = *e.epochs_total;
  if (e.steps_total) progress_.steps_total = *e.steps_total;
  if (e.samples) progress_.samples = *e.samples;
  if (e.test_accuracy) targets_.Observe(*e.test_accuracy);
  absl::Status s;
  if (e.kind == CommandEvent::Kind::kCheckpoint) s = OnCheckpoint(e, fd);
  if (e.kind == CommandEvent::Kind::kModel) s = OnModel(e, fd);
  if (!s.ok()) spdlog::warn("{}", s.message());
  if (l_.rank != 0 || (!e.train_loss && !e.test_accuracy)) {
    reporter_.ReportProgress(progress_);
    return;
  }
  MetricSample m;
  m.step = e.step;
  m.epoch = e.epoch;
  m.wall_time_ms = SystemClock::Get().NowMs();
  m.train_loss = e.train_loss.value_or(0);
  m.samples_per_s = e.samples_per_s.value_or(0);
  m.test_accuracy = e.test_accuracy;
  m.test_loss = e.test_loss;
  reporter_.Report(m, progress_);
}

absl::Status CommandJob::OnCheckpoint(const CommandEvent& e, int in) {
  if (l_.rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint '", e.path, "' ignored: rank 0 commits the job's checkpoints and models"));
  }
  if (in < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", e.path,
                     "' not committed: weft-event-reader could not open it (why is above)"));
  }
  RETURN_IF_ERROR(MakeDirs(l_.checkpoint_dir));
  const std::string dest = CheckpointPath(l_.checkpoint_dir, e.step);
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<int64_t> bytes = CopyDurably(in, dest, kMaxCommandFileBytes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", e.path, "' not committed: it ", bytes.status().message()));
  }
  RETURN_IF_ERROR(reporter_.CommitCheckpoint(dest, e.epoch, e.step, *bytes, seconds));
  spdlog::info("checkpoint at step {} committed: {} ({} bytes, from {})", e.step, dest, *bytes,
               e.path);
  return absl::OkStatus();
}

absl::Status CommandJob::OnModel(const CommandEvent& e, int in) {
  if (l_.rank != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", e.path, "' ignored: rank 0 commits the job's checkpoints and models"));
  }
  if (in < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", e.path, "' not kept: weft-event-reader could not open it (why is above)"));
  }
  // The final model is the last one announced before the program exits 0: keep a copy now, as
  // the program may overwrite its file later.
  absl::Status s = MakeDirs(ModelDir(l_.result_dir, kFinalModel));
  absl::StatusOr<int64_t> bytes =
      s.ok() ? CopyDurably(in, CandidatePath(), kMaxCommandFileBytes) : s;
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", e.path, "' not kept: it ", bytes.status().message()));
  }
  candidate_ = e;
  if (!targets_.WouldDeliver(*e.test_accuracy)) return absl::OkStatus();
  spdlog::info("deliver target met: test_accuracy {:.4f} >= {}", *e.test_accuracy,
               *spec_.targets.deliver);
  RETURN_IF_ERROR(MakeDirs(ModelDir(l_.result_dir, kDeliveredModel)));
  const std::string dest = ModelPath(l_.result_dir, kDeliveredModel);
  int candidate = ::open(CandidatePath().c_str(), O_RDONLY | O_CLOEXEC);
  if (candidate < 0) return Errno("open the model's copy");
  bytes = CopyDurably(candidate, dest, kMaxCommandFileBytes);
  ::close(candidate);
  if (!bytes.ok()) return bytes.status();
  RETURN_IF_ERROR(CommitModel(kDeliveredModel, dest, e, *bytes));
  targets_.MarkDelivered();
  return absl::OkStatus();
}

absl::Status CommandJob::CommitModel(const std::string& kind, const std::string& model_path,
                                     const CommandEvent& e, int64_t bytes) {
  const std::string card_path = ModelCardPath(l_.result_dir, kind);
  nlohmann::json card = {
      {"job_id", l_.job_id},
      {"kind", kind},
      {"architecture", "command"},
      {"command", spec_.command},
      {"format", "the file the job's program saved (TorchScript when it used torch.jit.save)"},
      {"epoch", e.epoch},
      {"step", e.step},
      {"metrics", {{"test_accuracy", *e.test_accuracy}, {"best_test_accuracy", targets_.best()}}},
      {"manifest_digest", SpecDigest(spec_)},
      {"spec", SpecToJson(spec_)},
      {"created_at", FormatTimeMs(SystemClock::Get().NowMs())},
      {"bytes", bytes},
  };
  RETURN_IF_ERROR(WriteFileAtomic(card_path, card.dump(2) + "\n"));
  spdlog::info("{} model written: {} ({} bytes, test_accuracy {:.4f})", kind, model_path, bytes,
               *e.test_accuracy);
  return reporter_.CommitModel(
      {kind, model_path, card_path, *e.test_accuracy, e.epoch, e.step, bytes});
}

std::optional<int> CommandJob::Supervise(CommandProcess& p) {
  int64_t kill_at_ms = 0;
  for (;;) {
    ReadEvents();
    if (std::optional<int> status = p.Poll()) {
      do {
        ReadEvents();  // what it wrote last
      } while (reader_status_.ok() && reader_->more());
      if (kill_at_ms != 0) return std::nullopt;
      return status;
    }
    const TimeMs now = SystemClock::Get().NowMs();
    if (kill_at_ms == 0 && (StopRequested() || !reader_status_.ok())) {
      spdlog::info("stopping the program (SIGTERM; SIGKILL in {} ms)", kStopGraceMs);
      p.Terminate();
      kill_at_ms = now + kStopGraceMs;
    }
    if (kill_at_ms != 0 && now >= kill_at_ms) {
      spdlog::warn("the program did not stop in {} ms; killing it", kStopGraceMs);
      p.Kill();
      p.Wait();
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
}

absl::StatusOr<LoopResult> CommandJob::Finish(int status) {
  if (InContainer() && WIFEXITED(status) &&
      (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)) {
    // podman: the command is not in the image, or cannot be run there. It would not be after a
    // restart either.
    return absl::InvalidArgumentError(
        absl::StrCat("command: '", spec_.command.at(0), "' cannot be run in the image ",
                     l_.program_container.image, " (podman exit ", WEXITSTATUS(status),
                     "; its message is above in this log)"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat("the command ", DescribeWaitStatus(status)));
  }
  LoopResult result;
  result.succeeded = true;
  result.best_test_accuracy = targets_.best();
  if (l_.rank != 0) {
    result.reason = absl::StrFormat("rank %d of %d: the command exited 0", l_.rank, l_.world_size);
    return result;
  }
  if (!candidate_) {
    return absl::InvalidArgumentError(
        "the program exited 0 without announcing a model (weft_job.save_model): a job hands "
        "back a final model");
  }
  const std::string dest = ModelPath(l_.result_dir, kFinalModel);
  if (::rename(CandidatePath().c_str(), dest.c_str()) != 0) return Errno("rename final model");
  absl::StatusOr<int64_t> bytes = FileSize(dest);
  if (!bytes.ok()) return bytes.status();
  RETURN_IF_ERROR(CommitModel(kFinalModel, dest, *candidate_, *bytes));
  result.final_test_accuracy = *candidate_->test_accuracy;
  result.reason = targets_.FinishReason(
      absl::StrFormat("the command exited 0; best test_accuracy %.4f", targets_.best()));
  return result;
}

absl::StatusOr<std::unique_ptr<CommandProcess>> CommandJob::StartInContainer(
    const CommandProcessOptions& po, const std::string& image, const std::string& what) {
  ContainerSpec spec = ProgramContainerSpec(l_, po, image, what);
  spec.record_init_pid = true;  // Terminate() signals the container's init
  ASSIGN_OR_RETURN(RuntimeCommand run, container_->Command(spec));
  return CommandProcess::StartInContainer(run, container_->KillCommand(spec.name), *container_,
                                          spec.name, po.stdin_fd);
}

absl::StatusOr<LoopResult> CommandJob::Run() {
  spdlog::info("command job: {}", absl::StrJoin(spec_.command, " "));
  if (l_.program_container.runtime == "podman") {
    ASSIGN_OR_RETURN(container_, PodmanRuntime::Open(
                                     {"/usr/bin/podman", l_.program_container.engine_config_dir}));
  }
  RETURN_IF_ERROR(PrepareWorkDir());
  RETURN_IF_ERROR(Unpack());
  ASSIGN_OR_RETURN(pid_t network, GangNetwork());
  if (StopRequested()) return LoopResult{false, true, "stopped on request", 0, 0, -1};
  RETURN_IF_ERROR(StartReader());
  CommandProcessOptions po = ProcessOptions(spec_.command);
  po.join_network_of = network;
  std::unique_ptr<CommandProcess> program;
  if (InContainer()) {
    // A program its image has not got would fail the same way at every restart: say so now.
    // (Its container's init would only say that it exited 1.) One in WORK_DIR is the code's.
    const std::string& argv0 = spec_.command.at(0);
    if (argv0.rfind(l_.work_dir + "/", 0) != 0 && argv0.rfind("./", 0) != 0) {
      absl::Status has = container_->HasProgram(l_.program_container.image, argv0, kProgramPath);
      if (absl::IsNotFound(has)) {
        return absl::InvalidArgumentError(
            absl::StrCat("command: '", argv0, "' cannot be run in the image ",
                         l_.program_container.image, ": ", has.message()));
      }
      if (!has.ok()) spdlog::warn("{}", has.message());
    }
    ASSIGN_OR_RETURN(program, StartInContainer(po, l_.program_container.image, "program"));
    spdlog::info("started the program in a container of image {} (uid {})",
                 l_.program_container.image, l_.program_container.uid);
  } else {
    ASSIGN_OR_RETURN(program, Start(po));
    spdlog::info("started the program, pid {}{}", program->program_pid(),
                 sandbox_ ? " (in the sandbox)" : " (not sandboxed)");
  }
  if (l_.program_container.runtime.empty() && sandbox_ && l_.world_size > 1 && l_.rank == 0) {
    const std::string root = std::filesystem::path(l_.work_dir).parent_path();
    RETURN_IF_ERROR(WriteFileAtomic(absl::StrCat(root, "/network-", l_.attempt, ".pid"),
                                    absl::StrCat(program->program_pid())));
  }
  std::optional<int> status = Supervise(*program);
  RETURN_IF_ERROR(reader_status_);  // the program was stopped: its output could not be read
  if (!status) return LoopResult{false, true, "stopped on request", targets_.best(), 0, -1};
  spdlog::info("the program {}", DescribeWaitStatus(*status));
  return Finish(*status);
}

}  // namespace

absl::StatusOr<LoopResult> RunCommandJob(const LoopOptions& options, Reporter& reporter) {
  CommandJob job(options, reporter);
  return job.Run();
}

}  // namespace weft::train
