#include "executor/runtime_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace weft {
namespace {

constexpr int64_t kProbeTimeoutMs = 120000;

// The last non-empty line of `text`, for an error message.
std::string LastLine(const std::string& text) {
  absl::string_view t = absl::StripTrailingAsciiWhitespace(text);
  const size_t nl = t.rfind('\n');
  return std::string(nl == absl::string_view::npos ? t : t.substr(nl + 1));
}

// Starts weft-learner in a container of the runtime image, as a learner would be but with no
// job: it must load its libraries and stop at once, saying it has no job.
absl::Status Probe(const PodmanRuntime& podman, const RuntimeOptions& o) {
  ContainerSpec s;
  s.name = absl::StrCat("weft-probe-", ::getpid());
  s.image = o.image;
  const std::string bin_dir = std::filesystem::path(o.learner_binary).parent_path().string();
  s.argv = {absl::StrCat(kContainerBinDir, "/weft-learner")};
  s.mounts.push_back({o.learner_binary, s.argv[0], true});
  for (const std::string& dir : LearnerLibraryDirs()) s.mounts.push_back({dir, dir, true});
  s.uid = o.first_uid;
  s.pids_limit = o.pids_limit;
  s.env = {{"PATH", "/usr/bin:/bin"}};
  ASSIGN_OR_RETURN(RuntimeCommand cmd, podman.Command(s));
  cmd.argv.insert(cmd.argv.begin() + 2, "--replace");
  absl::StatusOr<CommandResult> r = RunCommand(cmd.argv, cmd.env, kProbeTimeoutMs, "", 022);
  if (!r.ok()) return absl::FailedPreconditionError(r.status().message());
  if (r->exit_code == 2 && absl::StrContains(r->output, "is not set")) return absl::OkStatus();
  const std::string why = LastLine(r->output);
  if (absl::StrContains(r->output, "image not known") ||
      absl::StrContains(r->output, "no such image")) {
    return absl::FailedPreconditionError(
        absl::StrCat("the runtime image ", o.image,
                     " is not built: run scripts/build-runtime-image.sh (podman said: ", why, ")"));
  }
  if (r->exit_code == 127 || absl::StrContains(r->output, "shared libraries")) {
    return absl::FailedPreconditionError(
        absl::StrCat("weft-learner cannot run in the runtime image ", o.image, ": ", why,
                     " (rebuild it with scripts/build-runtime-image.sh after building weft)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "podman cannot start a learner's container on this host (exit ", r->exit_code, "): ", why));
}

}  // namespace

std::vector<std::string> LearnerLibraryDirs() {
  std::vector<std::string> dirs;
#ifdef WEFT_OPENBLAS_DIR
  const std::string openblas = WEFT_OPENBLAS_DIR;
  struct stat st {};
  if (!openblas.empty() && ::stat(openblas.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    dirs.push_back(openblas);
  }
#endif
  return dirs;
}

absl::StatusOr<std::unique_ptr<PodmanRuntime>> SetUpPodman(const RuntimeOptions& o) {
  const std::string run = o.data_dir + "/run";
  RETURN_IF_ERROR(MakeDirs(run));
  ::chmod(run.c_str(), 0700);
  PodmanRuntime::Options po;
  po.config_dir = run + "/podman";
  ASSIGN_OR_RETURN(std::unique_ptr<PodmanRuntime> podman, PodmanRuntime::Create(po));
  RETURN_IF_ERROR(Probe(*podman, o));
  return podman;
}

absl::StatusOr<std::unique_ptr<ContainerLauncher>> SetUpRuntime(const RuntimeOptions& o,
                                                                AttemptChannels& channels) {
  if (o.runtime == "none") return std::unique_ptr<ContainerLauncher>();
  if (o.runtime != "podman" && o.runtime != "bwrap") {
    return absl::InvalidArgumentError(absl::StrCat("unknown runtime '", o.runtime, "'"));
  }
  const std::string run = o.data_dir + "/run";
  RETURN_IF_ERROR(MakeDirs(run));
  ::chmod(run.c_str(), 0700);
  std::unique_ptr<ContainerRuntime> runtime;
  std::string config_dir;
  if (o.runtime == "podman") {
    ASSIGN_OR_RETURN(std::unique_ptr<PodmanRuntime> podman, SetUpPodman(o));
    config_dir = podman->options().config_dir;
    runtime = std::move(podman);
  } else {
    ASSIGN_OR_RETURN(runtime, BwrapRuntime::Create());
  }
  JobIsolation::Options io;
  io.netns_dir = run + "/netns";
  io.shm_dir = absl::StrCat("/dev/shm/weft-", o.tag);
  io.first_uid = o.first_uid;
  io.uid_count = o.uid_count;
  ContainerLauncher::Options lo;
  lo.learner.image = o.image;
  lo.learner.learner_binary = o.learner_binary;
  lo.learner.library_dirs = LearnerLibraryDirs();
  lo.learner.pids_limit = o.pids_limit;
  lo.learner.hidden_dir = o.data_dir;
  lo.engine_config_dir = config_dir;
  return std::make_unique<ContainerLauncher>(std::move(runtime), std::move(lo),
                                             std::make_unique<JobIsolation>(io, channels));
}

}  // namespace weft
