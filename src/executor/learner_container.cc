#include "executor/learner_container.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace weft {
namespace {

// The learner's libraries' environment: the image's PATH and a home of its own (/tmp, private).
constexpr char kPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// nftw's callback has no closure: the uid it hands files to, per thread.
thread_local uid_t chown_to = 0;
thread_local int chown_errno = 0;

int ChownEntry(const char* path, const struct stat* st, int, struct FTW*) {
  if ((st->st_uid != chown_to || st->st_gid != chown_to) &&
      ::lchown(path, chown_to, chown_to) != 0) {
    chown_errno = errno;
    return 1;
  }
  return 0;
}

// `dir` and everything below it (symbolic links themselves, never what they name) become `uid`'s.
absl::Status ChownTree(const std::string& dir, uid_t uid) {
  chown_to = uid;
  chown_errno = 0;
  if (::nftw(dir.c_str(), ChownEntry, 16, FTW_PHYS | FTW_MOUNT) != 0) {
    return absl::InternalError(absl::StrCat("cannot give ", dir, " to uid ", uid, ": ",
                                            std::strerror(chown_errno ? chown_errno : errno)));
  }
  return absl::OkStatus();
}

// `path`, a regular file of the job's inputs, becomes `uid`'s alone (0600). One with other links
// (its content is the tenant's artifact, which other jobs may use as their uid) is first replaced
// by a copy of its own.
absl::Status GiveFile(const std::string& path, uid_t uid) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return absl::OkStatus();
  if (st.st_nlink > 1) {
    const std::string tmp = path + ".own";
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    if (!std::filesystem::copy_file(path, tmp, ec) || ::rename(tmp.c_str(), path.c_str()) != 0) {
      std::filesystem::remove(tmp, ec);
      return absl::InternalError(absl::StrCat(
          "cannot copy ", path, " for its job: ", ec ? ec.message() : std::strerror(errno)));
    }
  }
  if (::lchown(path.c_str(), uid, uid) != 0 || ::chmod(path.c_str(), 0600) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot give ", path, " to uid ", uid, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// An input directory of the job (its TorchScript model, its own data set) and its files become
// `uid`'s alone.
absl::Status GiveInputs(const std::string& dir, uid_t uid) {
  if (!IsDir(dir)) return absl::OkStatus();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && !entry.is_symlink(ec)) {
      RETURN_IF_ERROR(GiveFile(entry.path().string(), uid));
    }
  }
  if (::lchown(dir.c_str(), uid, uid) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot give ", dir, " to uid ", uid, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> OperatorLearnerVariables() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& kv : ProcessEnvironment()) {
    if (!absl::StartsWith(kv, "WEFT_LEARNER_")) continue;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

std::string LearnerContainerName(const LearnerLaunch& l, uint64_t serial) {
  return absl::StrCat("weft-", l.job_id, "-a", l.attempt, "-r", l.rank, "-", serial);
}

ContainerSpec LearnerContainer(const LearnerLaunch& launch, const LearnerContainerOptions& o,
                               const AttemptSetup& setup, const std::string& cgroup_parent,
                               const std::string& name) {
  // The learner as its container sees it: weftd's coordinator at the channel's socket, or
  // without a channel (a Slurm node: the host's network) at its TCP address, with weftd's CA.
  LearnerLaunch inside = launch;
  if (!setup.channel_dir.empty()) {
    inside.coordinator_address = absl::StrCat("unix:", kChannelMountPoint, "/", kChannelSocket);
    inside.coordinator_ca_path.clear();
  }
  inside.private_dir.clear();

  ContainerSpec s;
  s.name = name;
  s.image = o.image;
  const bool server = launch.ps_server >= 0;
  const std::string bin_dir = std::filesystem::path(o.learner_binary).parent_path().string();
  const std::string program = server ? "weft-ps" : "weft-learner";
  if (o.on_image) {
    s.argv = {absl::StrCat(kContainerBinDir, "/", program)};
    s.mounts.push_back({absl::StrCat(bin_dir, "/", program), s.argv[0], true});
    for (const std::string& dir : o.library_dirs) {
      if (IsDir(dir)) s.mounts.push_back({dir, dir, true});
    }
  } else {
    // The host's root is its root; the program is bound at its own path all the same, which may
    // lie in a directory the sandbox covers (a build under /tmp).
    s.argv = {absl::StrCat(bin_dir, "/", program)};
    s.mounts.push_back({s.argv[0], s.argv[0], true});
    if (!o.hidden_dir.empty()) s.hidden.push_back(o.hidden_dir);
  }
  if (server) {
    s.argv.insert(s.argv.end(), {"--listen", launch.ps_servers.at(launch.ps_server)});
  }
  s.mounts.push_back({launch.spec_path, launch.spec_path, true});
  for (const std::string& dir : {launch.data_dir, launch.model_dir}) {
    if (!dir.empty()) s.mounts.push_back({dir, dir, true});
  }
  for (const std::string& dir : {launch.checkpoint_dir, launch.result_dir, launch.log_dir}) {
    s.mounts.push_back({dir, dir, false});
  }
  if (!setup.channel_dir.empty()) s.mounts.push_back({setup.channel_dir, kChannelMountPoint, true});
  if (!inside.coordinator_ca_path.empty()) {
    s.mounts.push_back({inside.coordinator_ca_path, inside.coordinator_ca_path, true});
  }
  if (!setup.shm_dir.empty()) s.mounts.push_back({setup.shm_dir, "/dev/shm", false});

  s.env = {{"PATH", kPath}, {"HOME", "/tmp"}, {"LANG", "C.UTF-8"}, {"TMPDIR", "/tmp"}};
  for (auto& kv : OperatorLearnerVariables()) s.env.push_back(std::move(kv));
  for (auto& kv : LearnerEnvironment(inside)) {
    if (!kv.second.empty()) s.env.push_back(std::move(kv));
  }
  s.uid = setup.uid;
  s.network_namespace = setup.network_namespace;
  s.cgroup_parent = cgroup_parent;
  s.cpus = launch.cpus;
  s.cpuset = launch.cpuset;
  s.pids_limit = o.pids_limit;
  s.host_network = o.host_network;
  if (o.own_memory_limit) s.memory_bytes = launch.memory_limit_mb << 20;
  s.labels = {{"weft.job", launch.job_id},
              {"weft.attempt", absl::StrCat(launch.attempt)},
              {"weft.rank", absl::StrCat(launch.rank)}};
  return s;
}

void ReadEngineExit(LearnerExit* e) {
  if (e->signal != 0 || e->status_unknown) return;
  // 143 is weft-learner's own (kLearnerExitStopped: it stopped on SIGTERM as asked), as outside
  // a container; it exits with no other code above 128.
  if (e->exit_code > 128 && e->exit_code < 128 + 32 && e->exit_code != kLearnerExitStopped) {
    e->signal = e->exit_code - 128;
    e->exit_code = -1;
  } else if (e->exit_code == 127) {
    e->cause = "its image cannot run the learner (podman exit 127)";
    e->exit_code = kLearnerExitUserError;
  } else if (e->exit_code == 125 || e->exit_code == 126) {
    e->cause =
        absl::StrCat("the container engine could not start it (podman exit ", e->exit_code, ")");
  }
}

absl::Status PrepareJobFiles(const LearnerLaunch& l, uid_t uid) {
  for (const std::string& dir : {l.checkpoint_dir, l.result_dir, l.log_dir}) {
    RETURN_IF_ERROR(MakeDirs(dir));
    RETURN_IF_ERROR(ChownTree(dir, uid));
  }
  // Mounted on their own, these keep their owner and mode in the container (the directories
  // above them there are the container's own): the job's uid's, still owner-only.
  RETURN_IF_ERROR(GiveFile(l.spec_path, uid));
  const std::string job_dir = std::filesystem::path(l.spec_path).parent_path().string();
  for (const std::string& dir : {l.model_dir, l.data_dir}) {
    if (!dir.empty() && dir.rfind(job_dir + "/", 0) == 0) RETURN_IF_ERROR(GiveInputs(dir, uid));
  }
  return absl::OkStatus();
}

}  // namespace weft
