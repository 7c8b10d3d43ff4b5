// A command job's learner (docs/manifest.md "Command jobs"): weft-learner as the supervisor of
// the tenant's own program. It makes WORK_DIR afresh, unpacks the code archive there, starts the
// program in the sandbox (train/command_process.h) with the torchrun and FfDL environment, has
// weft-event-reader read — as the job's uid, not root (train/command_event_reader.h) — the JSON
// lines the program appends to $WEFT_METRICS_FILE (train/command_events.h), and turns them into
// weft's own reports, checkpoints and models — copied by weft-learner to the paths
// weftd derives, so nothing the program names is trusted — and stops the program on halt,
// preemption or a lost gang (SIGTERM, then SIGKILL after a grace period).
#pragma once

#include "absl/status/statusor.h"
#include "train/reporter.h"
#include "train/training_loop.h"

namespace weft::train {

// The longest checkpoint or model file a program may announce, in bytes.
inline constexpr int64_t kMaxCommandFileBytes = int64_t{4} << 30;

// Runs options.spec's command to its end. The result says it succeeded (the program exited 0;
// the last model it announced is committed as the final model) or stopped (on request).
// InvalidArgument when the code cannot be unpacked or the program is not found;
// FailedPrecondition when the sandbox cannot be set up and weftd requires it; Unavailable when
// the program failed (a restart from the latest checkpoint may help); errors from committing.
absl::StatusOr<LoopResult> RunCommandJob(const LoopOptions& options, Reporter& reporter);

}  // namespace weft::train
