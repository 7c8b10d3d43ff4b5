// A Pollux workload scaled down to a live run (issue 46, docs/simulation.md "Live replay"): each
// of a workload's first jobs becomes a built-in Fashion-MNIST job for a real weftd on a few
// logical nodes, submitted at the trace's arrival time scaled, with a budget of epochs in
// proportion to the trace job's GPU-seconds and a deliver target at the point of its budget where
// its application's curve meets weft-sim's deliver target. bench/cluster_replay.sh runs the plan.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/app_trace.h"
#include "sim/workload.h"

namespace weft::sim {

// A live model's measured behaviour on the replay's cluster, from a profiling run
// (bench/cluster_replay.sh runs one job per model on a busy cluster and records this).
struct ModelProfile {
  double epoch_seconds = 0;      // seconds per epoch on one learner, evaluation included, > 0
  std::vector<double> accuracy;  // test accuracy after epoch 1, 2, …; at least max_epochs values
  // Learner-seconds per epoch measured at some world sizes, (learners, seconds) by learners
  // ascending; empty when only `epoch_seconds` was (weft-sim then scales the job linearly).
  std::vector<std::pair<int, double>> by_learners;
  // Seconds a job of this model holds its learners without training, from its placement to its
  // first step and from its last epoch to its end (the container, the data set, the final
  // model); negative when not measured (weft-sim then charges its restart delay).
  double start_seconds = -1;
};

struct ReplayOptions {
  int jobs = 12;             // the workload's first N jobs by submission time
  double time_scale = 0.1;   // live seconds per trace second, for arrivals
  double work_scale = 0.01;  // live learner-seconds of training per trace GPU-second
  int learner_cap = 4;       // the most learners a job asks for (the trace's replicas, capped)
  bool elastic = false;      // learners {min: 1, max: capped replicas}; else a fixed gang
  int min_epochs = 1, max_epochs = 8;  // the budget's clamp
  int gpus_per_node = 4;          // the trace cluster's node size: the trace job's packed placement
  double deliver_fraction = 0.6;  // weft-sim's deliver target (SimOptions::deliver_fraction)
  double deliver_margin = 0.005;  // the live target is the profile's accuracy minus this
  int train_samples = 6000, test_samples = 1000, batch_size = 64;
  double cpus = 1;  // per learner (resources.cpus), > 0
  uint64_t seed = 1;
  // The progress an in-place resize of an elastic job costs, in seconds of its training (the
  // learners' stall, measured live at 0.02–0.11 s); negative: weft-sim's restart delay.
  double resize_seconds = 0.1;
  // The live model of each application; an application missing here gets "mlp". Defaults:
  // the image applications (cifar10, imagenet, yolov3) train the CNN.
  std::map<std::string, std::string> model_of_app = {
      {"cifar10", "cnn"}, {"imagenet", "cnn"}, {"yolov3", "cnn"}};
  std::map<std::string, ModelProfile> profiles;  // "cnn", "mlp"
};

// One trace job as the live run submits it.
struct ReplayJob {
  std::string name;  // the trace job's name
  std::string app;
  std::string model;  // "cnn" or "mlp"
  double trace_submit_s = 0;
  double submit_s = 0;  // live: seconds after the replay starts (the first job at 0)
  int replicas = 0;     // the trace's
  int min_learners = 0, max_learners = 0;
  double trace_gpu_seconds = 0;  // the trace job alone on the trace cluster, packed
  int epochs = 0;
  double deliver_epoch_fraction = 0;  // of the budget, from the application's curve, (0, 1]
  int deliver_epoch = 0;              // the epoch after which the profile reaches the target
  double deliver_accuracy = 0;
  std::string manifest;  // the job's YAML manifest
};

// The seconds the job of `app` at total batch `batch_size` on `replicas` GPUs takes alone,
// packed onto nodes of `gpus_per_node`, under the artifact's fixed-batch rule, without restarts:
// Σ over epochs of (P(e+1) − P(e)) / progress rate. InvalidArgument when a rate is unknown.
absl::StatusOr<double> IdealSeconds(const AppTrace& app, int batch_size, int replicas,
                                    int gpus_per_node);

// The plan: `o.jobs` jobs of `w` (a Pollux workload), in submission order. InvalidArgument
// naming the field for bad options (a profile missing or too short, non-positive scales) or for
// a Philly workload (it has no applications); NotFound for a missing application trace.
absl::StatusOr<std::vector<ReplayJob>> PlanReplay(const Workload& w, AppCatalog& apps,
                                                  const ReplayOptions& o);

// Reads profiles from JSON {"cnn": {"epoch_seconds": s, "accuracy": [a1, …],
// "epoch_seconds_by_learners": {"1": s1, "2": s2, …}, "start_seconds": s}, …} (the last two are
// optional: learner-seconds per epoch at each world size measured, and ModelProfile's
// start_seconds); InvalidArgument naming the field otherwise.
absl::StatusOr<std::map<std::string, ModelProfile>> ParseProfiles(const nlohmann::json& j);

// The plan as weft-sim's profiled jobs (sim/workload.h), one CSV row per job: the live arrival,
// the learners, the budget, the deliver epoch and the profile's learner-seconds per epoch (and,
// when a profile was measured at several world sizes, learner_seconds_by_learners for every row;
// when one has start_seconds, start_seconds and resize_seconds for every row).
std::string SimCsv(const std::vector<ReplayJob>& plan, const ReplayOptions& o);

// The plan as JSON: the options and, per job, every field but the manifest.
nlohmann::json PlanJson(const std::vector<ReplayJob>& plan, const ReplayOptions& o);

}  // namespace weft::sim
