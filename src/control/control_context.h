// What the controller's parts share (ElasticMembership, LearnerExits, AttemptStarter, Recovery):
// the store, the executor, the job specs, the recorder of job events, the learners' launch
// descriptions, the clock, the options, the data directory's layout and the file system. All are
// borrowed from the Controller, which holds this for as long as the parts live.
#pragma once

#include "common/clock.h"
#include "common/env.h"
#include "control/controller_options.h"
#include "control/job_recorder.h"
#include "control/launches.h"
#include "control/spec_cache.h"
#include "executor/executor.h"
#include "job/layout.h"
#include "store/store.h"

namespace weft {

struct ControlContext {
  Store& store;
  Executor& executor;
  SpecCache& specs;
  JobRecorder& recorder;
  Launches& launches;
  const Clock& clock;
  const ControllerOptions& options;
  const JobLayout& layout;
  Env& env;
};

}  // namespace weft
