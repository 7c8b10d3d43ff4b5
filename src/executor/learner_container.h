// What a learner's container holds: weft's runtime image (its libraries, python3 and torch), the
// learner's binary (weft-learner, or weft-ps for a parameter server) mounted read-only from
// weftd's installation, its job's files at their host paths (the spec, the model definition and
// data read-only; checkpoints, results and logs writable), its data set read-only, its
// attempt's channel to weftd at /run/weft and shared memory at /dev/shm; nothing else of the
// host's. Its environment is the learner contract's (job/learner_contract.h) with the
// coordinator at the channel's socket (where the attempt has one; on a Slurm node weftd's TCP
// address, its CA file mounted), and PATH, HOME, LANG, TMPDIR: nothing of weftd's own.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "executor/container_runtime.h"
#include "executor/executor.h"
#include "executor/job_isolation.h"
#include "job/learner_contract.h"

namespace weft {

struct LearnerContainerOptions {
  std::string image;           // weft's runtime image (podman reference)
  std::string learner_binary;  // host path of weft-learner; weft-ps is beside it
  // Host directories the binaries load libraries from outside the image (weft-learner's
  // OpenBLAS, train/blas.h), mounted read-only at the same paths; those missing are skipped.
  std::vector<std::string> library_dirs;
  int64_t pids_limit = 4096;  // processes and threads per learner
  // On a Slurm node: the host's network (the gang spans nodes, weftd is reached over TCP), and
  // the learner's memory limit on its container itself (no cgroup of weft's holds it there).
  bool host_network = false;
  bool own_memory_limit = false;
  // Whether the runtime's containers run on the image (podman) or on the host's root read-only
  // (bubblewrap: the binaries are then the host's own, and `hidden_dir`, weftd's data
  // directory, is hidden but for the job's own files).
  bool on_image = true;
  std::string hidden_dir;
};

// The operator's knobs for weft-learner that weftd passes on from its own environment: the
// variables named WEFT_LEARNER_* (the data audit, failpoints, kernel and allocator choices;
// job/audit.h, common/failpoint.h), as (name, value). Nothing else of weftd's environment reaches
// a learner.
std::vector<std::pair<std::string, std::string>> OperatorLearnerVariables();

// Where the learner binaries are in a container.
// How podman's exit code of a learner's container reads as the learner's own exit (`e`, whose
// signal is 0, is changed in place): 128 + n when signal n ended the learner (catatonit, the
// container's init, answers so: SIGKILL from the kernel's out-of-memory killer or from weft) —
// but 143, weft-learner's own exit after a SIGTERM it handled (kLearnerExitStopped), stays —,
// 127 when the learner cannot be run in its image (a user error: it would not be after a restart
// either), 125 and 126 when the engine failed to start it (runc's own errors, worth a restart;
// the message is the log's last line).
void ReadEngineExit(LearnerExit* e);

inline constexpr char kContainerBinDir[] = "/opt/weft/bin";

// A name for the container of `launch`, unique on this host: weft-<job>-a<attempt>-r<rank>-<n>
// with `serial` the executor's count of containers it started.
std::string LearnerContainerName(const LearnerLaunch& launch, uint64_t serial);

// The container of the built-in or TorchScript learner, or the parameter server, of `launch`
// (not a command job's: its supervisor runs outside and puts the tenant's program in one of its
// own, train/command_process.h). `cgroup_parent` is where its cgroups go (the learner's memory
// cgroup, relative to the hierarchy's root).
ContainerSpec LearnerContainer(const LearnerLaunch& launch, const LearnerContainerOptions& options,
                               const AttemptSetup& setup, const std::string& cgroup_parent,
                               const std::string& name);

// Makes the job's files usable by the container's uid, and by nobody else: the writable
// directories (checkpoints, results, logs) and what is in them, the spec, the model definition and
// the job's own data become the uid's, owner-only (an input that shares its content with the
// tenant's artifact is copied first, so that jobs of other uids keep theirs). Only weftd's data
// directory (0700) leads to them on the host. Internal with the path that failed.
absl::Status PrepareJobFiles(const LearnerLaunch& launch, uid_t uid);

}  // namespace weft
