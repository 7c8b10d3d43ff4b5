#include "executor/container_launcher.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace weft {

std::vector<std::string> HostLearnerEnvironment(const LearnerLaunch& launch) {
  std::vector<std::string> env;
  for (const std::string& kv : ProcessEnvironment()) {
    const std::string name = kv.substr(0, kv.find('='));
    // The sanitizers' options reach an instrumented learner (scripts/test.sh --sanitize).
    if (name == "PATH" || name == "LANG" || name == "TZ" || absl::StartsWith(name, "LC_") ||
        absl::StartsWith(name, "WEFT_LEARNER_") || absl::EndsWith(name, "SAN_OPTIONS")) {
      env.push_back(kv);
    }
  }
  for (const auto& [name, value] : LearnerEnvironment(launch)) {
    env.push_back(absl::StrCat(name, "=", value));
  }
  return env;
}

ContainerLauncher::ContainerLauncher(std::unique_ptr<ContainerRuntime> runtime, Options options,
                                     std::unique_ptr<JobIsolation> isolation)
    : runtime_(std::move(runtime)), options_(std::move(options)), isolation_(std::move(isolation)) {
  options_.learner.on_image = runtime_->UsesImage();
}

absl::StatusOr<ContainerLauncher::Launch> ContainerLauncher::Prepare(
    const LearnerLaunch& launch, const std::string& cgroup_path, std::optional<uid_t> adopted_uid) {
  const bool command = IsCommandLearner(launch);
  ASSIGN_OR_RETURN(AttemptSetup setup,
                   isolation_->Join(launch.job_id, launch.attempt, adopted_uid, !command));
  Launch out;
  out.uid = setup.uid;
  out.join_cgroup = !runtime_->PlacesCgroups();
  if (adopted_uid) return out;
  absl::Status s;
  if (command) {
    // The supervisor stays on the host; its program's container is described to it.
    LearnerLaunch supervised = launch;
    ProgramContainer& c = supervised.program_container;
    c.runtime = runtime_->Name();
    c.engine_config_dir = options_.engine_config_dir;
    c.runtime_image = options_.learner.image;
    c.image = launch.image.empty() ? options_.learner.image : launch.image;
    c.uid = setup.uid;
    c.network_namespace = setup.network_namespace;
    c.shm_dir = setup.shm_dir;
    c.cgroup_parent = cgroup_path;
    c.pids_limit = options_.learner.pids_limit;
    c.cpus = launch.cpus;
    c.cpuset = launch.cpuset;
    for (size_t i = 0; i < launch.gpus.size(); ++i) {
      const std::string cdi = i < launch.gpu_devices.size() ? launch.gpu_devices[i] : "";
      if (cdi.empty() || c.runtime != "podman") {
        isolation_->Leave(launch.job_id, launch.attempt);
        return absl::FailedPreconditionError(absl::StrCat(
            "GPU ", launch.gpus[i], " of node ", launch.node,
            cdi.empty() ? " has no CDI device name in weftd's inventory, so it cannot be given "
                          "to a container: list the node's GPUs with their cdi names "
                          "(nodes.yaml gpus: [{index, cdi}]) or install the vendor's CDI spec "
                          "under /etc/cdi"
                        : absl::StrCat(": the ", c.runtime,
                                       " runtime cannot give a container its "
                                       "devices; GPUs need weftd --runtime podman")));
      }
      c.devices.push_back(cdi);
    }
    out.command.argv = {options_.learner.learner_binary};
    out.command.env = HostLearnerEnvironment(supervised);
    // A supervisor under bubblewrap joins its gang's network itself (setns, as root).
    return out;
  }
  s = PrepareJobFiles(launch, setup.uid);
  if (s.ok()) {
    out.container = LearnerContainerName(launch, serial_.fetch_add(1) + 1);
    ContainerSpec spec =
        LearnerContainer(launch, options_.learner, setup, cgroup_path, out.container);
    // LocalExecutor::Stop signals the container's init, not the engine's process. (Slurm's
    // launch script has podman stop it, on the node.)
    spec.record_init_pid = true;
    absl::StatusOr<RuntimeCommand> cmd = runtime_->Command(spec);
    if (cmd.ok()) {
      out.command = *std::move(cmd);
    } else {
      s = cmd.status();
    }
  }
  if (!s.ok()) {
    isolation_->Leave(launch.job_id, launch.attempt);
    return s;
  }
  return out;
}

void ContainerLauncher::Release(const LearnerLaunch& launch) {
  isolation_->Leave(launch.job_id, launch.attempt);
}

}  // namespace weft
