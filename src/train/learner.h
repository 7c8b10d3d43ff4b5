// The weft-learner program: reads the learner contract from the environment (ARCHITECTURE.md),
// registers with weftd, trains, commits models and reports how it ended.
#pragma once

namespace weft::train {

// Process exit codes of weft-learner; weftd maps them to job outcomes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;    // a failure worth retrying
inline constexpr int kExitUserError = 2;   // bad spec or data: fail the job, do not retry
inline constexpr int kExitStopped = 143;   // stopped by SIGTERM or by weftd

// Runs the learner described by the environment and returns its exit code.
int RunLearnerFromEnvironment();

}  // namespace weft::train
