// The learner's training loop: data-parallel-ready SGD/Adam over in-memory data, evaluation on
// the test split, two-tier targets (TRADL: deliver a model early, complete at the second target)
// and model export. libtorch stays behind this header's .cc: errors come back as Status.
#pragma once

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "job/job_spec.h"
#include "job/learner_contract.h"
#include "train/models.h"
#include "train/reporter.h"

namespace weft::train {

struct LoopOptions {
  JobSpec spec;
  // Who this learner is and where its files go, as weftd launched it (job/learner_contract.h):
  // job_id, rank, world_size, result_dir (models: job/layout.h ModelPath), checkpoint_dir
  // (CheckpointPath), and for world_size > 1 the rendezvous where rank 0 serves the c10d
  // TCPStore.
  LearnerLaunch learner;
  int64_t rendezvous_timeout_ms = 120000;  // wait for all ranks, and for any one collective
  const std::atomic<bool>* stop_requested = nullptr;  // e.g. set by a SIGTERM handler
  // Where checkpoints and models are written; nullptr: the real filesystem (Env::Default()).
  // Tests pass one that injects disk errors.
  Env* env = nullptr;
  // The kernel of each built-in layer; RunTraining sets it (forced by WEFT_LEARNER_KERNELS or
  // timed by ChooseKernels) before the model is built.
  LayerKernels kernels;
  // Where rank 0 appends the job's data audit (job/audit.h); empty: no audit.
  std::string audit_path;
};

struct LoopResult {
  bool succeeded = false;
  bool stopped = false;  // stopped early on request (signal or weftd)
  std::string reason;    // "target met: ..." / "budget exhausted, best 0.9030" / ...
  double best_test_accuracy = 0;
  double final_test_accuracy = 0;
  int64_t resumed_from_step = -1;  // step of the checkpoint it resumed from, -1 if none
};

// Trains `options.spec` to the end of its budget or its complete target, reporting through
// `reporter`. With world_size > 1 it trains synchronously data-parallel with the job's other
// ranks (train/data_parallel.h): each rank takes every world_size-th sample of each epoch's
// permutation, gradients are averaged every step, evaluation is split over the ranks, and only
// rank 0 reports metrics, writes checkpoints and exports models. Resumes from the newest of
// reporter.ResumeFrom() that loads (a truncated or corrupt checkpoint is logged and skipped for the
// previous one); writes checkpoints as the spec's `checkpoint` section says, and one more when
// asked to stop. A periodic checkpoint the disk refuses (full: ResourceExhausted, I/O error) is
// logged and skipped; a model it refuses fails the run with that error. InvalidArgument / NotFound
// for user errors (bad data path, unreadable data, model that does not build): the job should fail
// without retries. Internal for libtorch failures; Unavailable / FailedPrecondition from the
// reporter when a model cannot be committed.
absl::StatusOr<LoopResult> RunTraining(const LoopOptions& options, Reporter& reporter);

// Test accuracy in [0, 1] of the model a learner delivered at `model_path` (TorchScript, logits
// [N, classes] from samples [N, ...]), on the first `limit` samples (0 = all) of the test split
// in `data_dir`, stored as `format` (train/dataset.h). InvalidArgument when the file is not a
// TorchScript module or the data do not load.
absl::StatusOr<double> EvaluateSavedModel(const std::string& model_path,
                                          const std::string& data_dir, int64_t limit = 0,
                                          const std::string& format = "idx");

}  // namespace weft::train
