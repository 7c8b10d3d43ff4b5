// Workloads weft-sim replays: the Pollux artifact's workload CSVs (name,time,application,
// num_replicas,batch_size) and Philly-style job logs (timestamp,duration,num_gpus,...).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/app_trace.h"

namespace weft::sim {

// One job of a workload, as submitted.
struct WorkloadJob {
  std::string name;
  double submit_s = 0;    // seconds from the start of the trace
  std::string app;        // application trace name; empty for duration jobs
  std::string tenant;     // Philly's virtual cluster; empty for Pollux workloads
  int replicas = 1;       // GPUs the submitter asked for
  int batch_size = 0;     // total batch the submitter chose (trace jobs)
  double duration_s = 0;  // known run time on `replicas` GPUs (duration jobs)
  // Profiled jobs (a live replay's, sim/replay.h): elastic from `min_replicas` to `replicas`
  // learners (equal: a fixed gang), `epochs` of training at `learner_seconds_per_epoch` seconds
  // of one learner per epoch (so r learners train r / that epochs per second), the deliver
  // target met after `deliver_epochs`.
  int min_replicas = 0;
  double epochs = 0;
  double deliver_epochs = 0;
  double learner_seconds_per_epoch = 0;
  // Profiled jobs measured at several world sizes: (learners, learner-seconds per epoch), by
  // learners ascending. Empty: `learner_seconds_per_epoch` at every size (linear scaling).
  std::vector<std::pair<int, double>> learner_seconds_by_learners;
  // Profiled jobs' measured costs, in seconds without progress: of a start (placement to
  // training, and the end: the last epoch to the nodes freed), and of an in-place resize of an
  // elastic job (the learners' stall). Negative: the simulator's restart delay for both.
  double start_seconds = -1;
  double resize_seconds = -1;

  // A profiled job's learner-seconds per epoch on `learners` learners: linear between the two
  // measured world sizes around it, the nearest measured one outside them, and
  // learner_seconds_per_epoch when none was measured.
  double LearnerSecondsPerEpoch(int learners) const;
};

struct Workload {
  std::string name;               // file name without .csv
  std::vector<WorkloadJob> jobs;  // in file order
  bool duration_jobs = false;     // Philly-style: every job has duration_s, no app
  bool profiled_jobs = false;     // a live replay's: every job profiled, no app
  // Whether its jobs are run against application traces (Pollux workloads).
  bool needs_apps() const { return !duration_jobs && !profiled_jobs; }
};

// Reads one workload file, recognising the format by its header: a Pollux workload, a Philly log
// or a live replay's profiled jobs (name,time,min_learners,max_learners,epochs,deliver_epochs,
// learner_seconds_per_epoch and, optionally, learner_seconds_by_learners as "1:20.5 2:21.3
// 4:24.0"; weft-replay writes it as sim.csv). Philly timestamps
// ("2017-10-09 07:01:55", UTC) become seconds after the earliest; jobs asking for no GPUs or
// without a duration are skipped (counted in *skipped). InvalidArgument naming the file and
// line on malformed rows.
absl::StatusOr<Workload> ReadWorkload(const std::string& path, int* skipped = nullptr);

// The workload-*.csv files of `dir` (or `path` itself if it is a file), sorted by name with
// numbers in numeric order (workload-2 before workload-10).
absl::StatusOr<std::vector<std::string>> WorkloadFiles(const std::string& path);

// Application traces loaded on first use from `<dir>/<app>/`.
class AppCatalog {
 public:
  explicit AppCatalog(std::string dir) : dir_(std::move(dir)) {}
  // NotFound naming the folder if the app has no traces.
  absl::StatusOr<const AppTrace*> Get(const std::string& app);

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<AppTrace>> apps_;
};

}  // namespace weft::sim
