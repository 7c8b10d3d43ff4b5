// An application's measured behaviour from the Pollux OSDI'21 artifact (`app-traces/<app>/`):
// step times per placement and per-GPU batch size, and per-epoch training progress and gradient
// statistics per total batch size. The ground truth weft-sim runs jobs against; the model is
// ../shared/traces/SIM-MODEL.md §2.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/job_model.h"
#include "sim/delaunay.h"

namespace weft::sim {

using scheduler::NodeCounts;

// Seconds per iteration at one per-GPU batch size without accumulation, and the part of it spent
// synchronising gradients.
struct StepTime {
  double step_s = 0;
  double sync_s = 0;
};

// A batch configuration: per-GPU ("atomic") batch b and accumulation steps s; total batch
// B = replicas × b × (s + 1).
struct BatchConfig {
  int atomic_bsz = 0;
  int accum_steps = 0;
};

class AppTrace {
 public:
  // Loads `dir` (placements.csv, scalability.csv, validation-<B>.csv); the app's name is the
  // folder's name. max_epochs and the yolov3 bmax override come from the artifact's
  // applications.py. NotFound / InvalidArgument naming the file on bad input.
  static absl::StatusOr<std::unique_ptr<AppTrace>> Load(const std::string& dir);

  const std::string& name() const { return name_; }
  int init_batch_size() const { return b0_; }         // B0, smallest validated total batch
  int max_batch_size() const { return bmax_total_; }  // Bmax
  int min_local_bsz() const { return bmin_; }
  int max_local_bsz() const { return bmax_; }
  int max_epochs() const { return max_epochs_; }  // E

  // True step time on `placement` (GPUs per node) at per-GPU batch `local_bsz`: rotation-
  // canonical lookup with linear interpolation in the batch for placements that were measured,
  // Delaunay-linear interpolation over (nodes, replicas, local batch) otherwise (§2.1).
  // OutOfRange when the query lies outside the measurements. Cached.
  absl::StatusOr<StepTime> Step(const NodeCounts& placement, int local_bsz) const;

  // Gradient second moment μ² and variance σ² at total batch `batch_size` in `epoch`,
  // each interpolated linearly in the batch between the bracketing validated sizes (§2.2).
  struct GradStats {
    double sqr = 0;
    double var = 0;
  };
  GradStats Grad(double batch_size, int epoch) const;

  // P(e): progress (in B0-iterations) at which epoch e begins; P(0) = 0, P(E) = completion.
  double EpochStart(int epoch) const;
  // Cumulative iterations at the end of `epoch` at total batch `batch_size` (`iteration`
  // column), linear in the batch between validated sizes.
  double Iterations(double batch_size, int epoch) const;

  // The artifact's batch rule for a fixed total batch `batch_size` on `replicas` GPUs (§3).
  // `force_accum_single` forces s >= 1 on one GPU (Optimus's estimate); otherwise only when the
  // batch exceeds B0.
  BatchConfig FixedBatch(int batch_size, int replicas, bool force_accum_single) const;

  // The job's metric after `progress` B0-iterations, from the `metric` column of
  // validation-B0.csv (the curve at the job's initial batch; progress is measured in B0-iterations
  // at every batch size, so one curve serves all): linear between the epoch ends P(e) -> metric
  // after epoch e, the first epoch's value before P(1) and the last one's after P(E).
  double MetricAt(double progress) const;
  // The total batch sizes with a validation-<B>.csv, ascending: a search space over the batch.
  std::vector<int> ValidatedBatchSizes() const;
  // The metric after `epochs` epochs (of progress, P(epochs)) trained at total batch
  // `batch_size`, from validation-<batch_size>.csv's `metric` column: the curve of that batch,
  // not B0's (epochs clamped to [1, E]); nullopt if `batch_size` was not validated.
  std::optional<double> MetricAfter(int batch_size, int epochs) const;

  // The two-tier targets weft-sim gives the app's jobs (docs/simulation.md, "Targets"): deliver =
  // the metric at `fraction` of the completion progress P(E), complete = the metric after the last
  // epoch; `deliver_progress` = the least progress at which the curve first reaches `deliver`.
  // Whether higher is better follows from the curve: the last epoch's metric against the first's.
  struct Targets {
    double deliver = 0;
    double complete = 0;
    bool higher_is_better = true;
    double deliver_progress = 0;  // B0-iterations, in (0, P(E)]
  };
  Targets TargetsAt(double fraction) const;

  // True progress rate (B0-iterations per second) at `cfg` on `placement` in `epoch`:
  // gain / T_iter (§2.2). 0 if the step time is unknown.
  double ProgressRate(const NodeCounts& placement, BatchConfig cfg, int epoch) const;

  // The batch configuration with the highest true progress rate on `placement` in `epoch`,
  // searched like Pollux's optimize(): 50 geometric total sizes from max(B0, bmin·r) to Bmax.
  BatchConfig BestBatch(const NodeCounts& placement, int epoch, double* rate) const;

 private:
  struct Row {
    double local_bsz;
    double step_s;
    double sync_s;
  };
  struct Validation {
    int batch_size;
    std::vector<double> progress, iteration, metric, grad_sqr, grad_var;
  };
  // Load's parts: placements.csv (step times by placement) and the optional scalability.csv
  // add to the 3-D point set of the step-time scatter; validation-<B>.csv files, ascending.
  absl::Status LoadPlacements(const std::string& dir, std::vector<Delaunay3::Point>* points,
                              std::vector<double>* values);
  absl::Status LoadScalability(const std::string& dir, std::vector<Delaunay3::Point>* points,
                               std::vector<double>* values);
  absl::Status LoadValidations(const std::string& dir);
  // B0, the largest batch, the epoch budget and P(e) from the validations.
  void IndexEpochs();
  // Bracketing validated curves for a total batch; *x = the batch to interpolate at.
  void Bracket(double batch_size, const Validation** lo, const Validation** hi, double* x) const;

  std::string name_;
  int b0_ = 0, bmax_total_ = 0, bmin_ = 0, bmax_ = 0, max_epochs_ = 0;
  std::map<int64_t, std::vector<Row>> placements_;  // canonical placement id -> rows by batch
  std::optional<Delaunay3> scatter_;
  std::vector<Validation> validations_;  // ascending batch size
  std::vector<double> epoch_start_;      // P(0..E)
  mutable std::unordered_map<uint64_t, StepTime> cache_;
};

// The lexicographically smallest cyclic rotation of `placement` with zeros dropped, as an
// integer: (2,1) -> 12, (1,2,1) -> 112 (§2.1). 0 for an empty placement.
int64_t CanonicalPlacementId(const NodeCounts& placement);

}  // namespace weft::sim
