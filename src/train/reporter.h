// How a learner tells weftd what it is doing: metrics, progress, committed models, the end.
// The training loop talks to this interface; CoordinatorReporter implements it over gRPC, tests
// and benchmarks may use their own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "ps/shared_server.h"

namespace weft::train {

struct ProgressReport {
  int epoch = 0;  // epochs completed
  int epochs_total = 0;
  int64_t step = 0;  // optimizer steps taken
  int64_t steps_total = 0;
  int64_t samples = 0;  // training samples consumed (this learner's share × world size)
  // A parameter-server job's rank 0: its server's counters in this attempt.
  std::optional<ps::ApplierStats> parameter_server;
};

struct MetricSample {
  int64_t step = 0;
  int epoch = 0;                        // epoch in progress (1-based) or just finished
  TimeMs wall_time_ms = 0;              // unix time, milliseconds
  double train_loss = 0;                // mean loss since the previous sample
  double samples_per_s = 0;             // training throughput since the previous sample
  std::optional<double> test_accuracy;  // set on evaluation samples, in [0, 1]
  std::optional<double> test_loss;
  int world_size = 0;  // the learners samples_per_s was measured at; 0: not said
};

// A model file written and fsync'd by the learner.
struct ModelFile {
  std::string kind;  // "delivered" or "final"
  std::string path;
  std::string card_path;
  double test_accuracy = 0;
  int epoch = 0;
  int64_t step = 0;
  int64_t bytes = 0;
};

// Where an elastic job's learner goes after losing a peer (Reporter::Regroup).
struct Membership {
  enum class Kind { kWait, kReform, kStop };
  Kind kind = Kind::kWait;  // kWait: not decided yet, ask again; kStop: leave (reason)
  int64_t generation = 0;   // the generation to join (kReform)
  int rank = 0;             // this learner's rank in it
  int world_size = 0;
  std::string rendezvous_host;  // where its rank 0 serves the group's store (world_size > 1)
  int rendezvous_port = 0;
  std::string reason;
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  // Announces this learner of a gang of `world_size` (0: not known yet), with the GPU devices it
  // was handed (host indices). FailedPrecondition if weftd refuses it (stale attempt, deleted
  // job, GPUs other than the ones it was placed on); Unavailable if weftd cannot be reached in
  // time.
  virtual absl::Status Register(int world_size, const std::vector<int>& gpus) = 0;
  // After Register: the job's committed checkpoints, newest first, to resume from.
  virtual std::vector<std::string> ResumeFrom() const = 0;
  // Queues a sample and the current progress; never blocks on the network.
  virtual void Report(const MetricSample& sample, const ProgressReport& progress) = 0;
  // Updates the progress the next heartbeat carries, without a sample; never blocks.
  virtual void ReportProgress(const ProgressReport& progress) = 0;
  // False once weftd has told this learner to stop (halted, deleted, fenced off).
  virtual bool KeepRunning() const = 0;
  // Registers a durable model with weftd; blocks, retrying, until weftd acknowledges.
  // FailedPrecondition if weftd refuses it; Unavailable if it cannot be reached in time.
  virtual absl::Status CommitModel(const ModelFile& model) = 0;
  // Registers a durable checkpoint (`bytes` long at `path`, written after `step` steps and
  // `epoch` completed epochs, in `write_seconds` of serialising and durable writing); blocks,
  // retrying, until weftd acknowledges. FailedPrecondition if weftd refuses it; Unavailable if it
  // cannot be reached in time.
  virtual absl::Status CommitCheckpoint(const std::string& path, int epoch, int64_t step,
                                        int64_t bytes, double write_seconds) = 0;
  // Flushes queued samples, then reports the end of training.
  virtual void Finish(bool succeeded, const std::string& reason, double best_test_accuracy) = 0;
  // An elastic job's learner lost a peer of `generation`'s group at `step` steps applied: asks
  // weftd once which group to re-form. Unavailable if weftd cannot be reached in time;
  // Unimplemented where there is no weftd to ask (the learner then stops like a fixed gang's).
  // The job's membership generation as weftd last said (0: unknown); later than the learner's
  // own: the job grew, and its learners re-form the group at their next step.
  virtual int64_t Generation() const { return 0; }
  virtual absl::StatusOr<Membership> Regroup(int64_t generation, int64_t step) {
    (void)generation;
    (void)step;
    return absl::UnimplementedError("no coordinator to regroup with");
  }
};

}  // namespace weft::train
