// What a job's learners and parameter servers are started with: the launch each gets
// (job/learner_contract.h LearnerLaunch: rank, world size, files, credentials, limits, the
// coordinator's address), and what a spec names that is resolved only at start — the data set it
// reads and the image it runs on, either of which may have gone since the job was submitted.
// The Controller asks for a launch when it starts, replaces, grows or adopts learners.
//
// Thread-safety: every method may run on any thread; the coordinator's address has its own
// lock, and the rest is read-only after construction.
#pragma once

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "control/controller_options.h"
#include "control/learner_credentials.h"
#include "executor/executor.h"
#include "job/job_spec.h"
#include "job/layout.h"
#include "store/store.h"

namespace weft {

class Launches {
 public:
  // All are borrowed and must outlive it; the store is read for data sets.
  Launches(Store& store, const Executor& executor, const LearnerCredentials& credentials,
           const ControllerOptions& options, const JobLayout& layout);

  // What learners are told to report to (WEFT_COORDINATOR; Controller::SetCoordinatorAddress).
  void SetCoordinatorAddress(const std::string& address);

  // The launch of learner `rank` of the current attempt of `record` (its id, node and world size
  // from record.learners); `rendezvous` is where rank 0 serves the gang's store (unused for one
  // learner); `data` what DataSet resolved (empty when adopting a learner that runs already).
  LearnerLaunch Learner(const JobRecord& record, const JobSpec& spec, int rank,
                        const std::pair<std::string, int>& rendezvous = {},
                        const DatasetRecord& data = {}) const;
  // The launch of a scale-out parameter-server job's server `index` (weft-ps on
  // record.servers[index], rank learners + index).
  LearnerLaunch Server(const JobRecord& record, const JobSpec& spec, int index,
                       const DatasetRecord& data = {}) const;
  // How many of the current attempt's learners train as one (JobSpec::LearnersAsOne, when the
  // executor can run that): the gang's size when it is all on one node, else 1.
  int LearnersAsOne(const JobRecord& record, const JobSpec& spec) const;

  // The data set the job reads: the tenant's artifact linked in at submission (data.artifact,
  // format tensors), the registered data set it names as the tenant may see it now, or for a
  // spec stored before data sets were registered its data.path (format idx); empty for a
  // command job that reads none. NotFound (starting "data.dataset: ") when the data set is gone
  // or no longer granted.
  absl::StatusOr<DatasetRecord> DataSet(const JobRecord& record, const JobSpec& spec) const;
  // The engine's reference of the image a command job names ("" for weft's runtime image).
  // NotFound (starting "image: ") when the image is gone or no longer granted, or no engine
  // keeps images.
  absl::StatusOr<std::string> Image(const JobRecord& record, const JobSpec& spec) const;

 private:
  std::string CoordinatorAddress() const;
  // `gpus` (a learner's devices on launch->node) and their CDI names from the inventory.
  void SetGpus(const std::vector<int>& gpus, LearnerLaunch* launch) const;

  Store& store_;
  const Executor& executor_;
  const LearnerCredentials& credentials_;
  const ControllerOptions& options_;
  const JobLayout& layout_;
  mutable absl::Mutex address_mu_;
  std::string coordinator_address_ ABSL_GUARDED_BY(address_mu_);
};

}  // namespace weft
