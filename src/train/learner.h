// The weft-learner program: reads the learner contract from the environment
// (job/learner_contract.h), registers with weftd, trains, commits models and reports how it ended.
#pragma once

namespace weft::train {

// Runs the learner described by the environment and returns its exit code (kLearnerExit*,
// job/learner_contract.h).
int RunLearnerFromEnvironment();

}  // namespace weft::train
