// Setting up the container runtime weftd's local executor runs learners in (weftd --runtime):
// the engine, its configuration of weft's own, each job's isolation, and a check at start that a
// learner's container really starts on this host — so that a runtime that cannot work is said at
// start, and jobs are refused with the reason, rather than failing one by one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "executor/container_launcher.h"
#include "executor/job_isolation.h"

namespace weft {

struct RuntimeOptions {
  std::string runtime = "podman";  // podman | bwrap | none
  std::string data_dir;            // weftd's; the runtime's own files go under <data_dir>/run
  std::string image;               // weft's runtime image (podman reference)
  std::string learner_binary;      // weft-learner's path; weft-ps beside it
  int64_t pids_limit = 4096;       // per learner
  uid_t first_uid = 1000000000;    // jobs' uids: [first_uid, first_uid + uid_count)
  int uid_count = 65536;
  std::string tag;  // tells apart the weftd processes of one host (its shared-memory directory)
};

// Host directories weft-learner loads libraries from outside any image (its OpenBLAS, built in
// as its run path; train/blas.h).
std::vector<std::string> LearnerLibraryDirs();

// podman set up for learners: writes weft's containers.conf and seccomp profile under
// <data_dir>/run/podman, then starts weft-learner in a container of the runtime image as a
// learner would be (its libraries must load; it exits at once for want of a job).
// FailedPrecondition saying what is wrong and how to mend it (as SetUpRuntime).
absl::StatusOr<std::unique_ptr<PodmanRuntime>> SetUpPodman(const RuntimeOptions& options);

// The launcher for `options.runtime` (null for "none": learners unconfined). For podman: writes
// weft's containers.conf and seccomp profile, then starts weft-learner in a container of the
// runtime image as a learner would be (its libraries must load; it exits at once for want of a
// job). FailedPrecondition saying what is wrong and how to mend it: podman, runc or the image
// missing, weftd not root, the image without weft-learner's libraries, the engine unable to
// start a container here. `channels` is borrowed and must outlive the launcher.
absl::StatusOr<std::unique_ptr<ContainerLauncher>> SetUpRuntime(const RuntimeOptions& options,
                                                                AttemptChannels& channels);

}  // namespace weft
