// The experiments inside weftd (docs/design.md "Hyperparameter search"): it validates and stores
// experiment manifests and, each round, drives every RUNNING experiment's search. A trial's job
// that ended its rung reports its metric; a promoted trial resumes from the checkpoint it wrote
// at the end of its rung with the next rung's budget (Controller::Resume); a new trial is
// submitted as a job of the experiment's tenant, under its quota and fair share, and stored with
// the search state that names it in one write (Controller::Submit with a TrialOf). The first
// trial to deliver gives the experiment its delivered model; one that meets the complete target
// ends the search.
//
// Everything it decides from is in the store — the search state (rungs, results, promotions,
// the number of trials drawn) and the trials' jobs — so a weftd restarted, or a standby that
// takes over, goes on exactly where the search was: a result is reported once (the stored state
// says which are in), and a promotion stored before its job was resumed is resumed by the next
// round.
//
// Every write of an experiment is published on the Controller's event feed (kExperiment, and
// kExperimentDeleted when it goes), right after the store took it.
//
// Thread-safety: all methods may be called from any thread; one mutex serialises the rounds and
// the submissions. Trials' jobs go through the Controller, which has its own lock.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "control/control_loop.h"
#include "control/controller.h"
#include "control/event_waker.h"
#include "control/experiment_search.h"
#include "job/experiment_spec.h"
#include "store/store.h"

namespace weft {

// How many experiments one tenant may have, so that no tenant fills the shared store or makes
// every round (which reads each RUNNING experiment and its trials) long for the others. 0: no
// limit. The trials are jobs and count against the job limits too (ControllerOptions).
struct ExperimentLimits {
  // In the store, in any state (weftd --tenant-max-experiments).
  int64_t tenant_max_experiments = 1000;
  // RUNNING at once (--tenant-max-running-experiments).
  int64_t tenant_max_running_experiments = 20;
};

class ExperimentController {
 public:
  // All are borrowed and must outlive it.
  ExperimentController(Store& store, Controller& jobs, const Clock& clock,
                       ExperimentLimits limits = {})
      : store_(store), jobs_(jobs), clock_(clock), limits_(limits) {}
  ~ExperimentController() { StopRounds(); }
  ExperimentController(const ExperimentController&) = delete;
  ExperimentController& operator=(const ExperimentController&) = delete;

  // Validates `manifest` (job/experiment_spec.h) and stores it, RUNNING, for `tenant`; its
  // first trials start at the next round. InvalidArgument with `errors` filled (each field and
  // its problem); FailedPrecondition, nothing stored, when the tenant is at one of its limits
  // (ExperimentLimits; the message names the flag); errors of the store.
  absl::StatusOr<ExperimentRecord> Submit(const std::string& manifest, const std::string& tenant,
                                          std::vector<FieldError>* errors) ABSL_LOCKS_EXCLUDED(mu_);

  // One round: for each RUNNING experiment, the results of its trials, its targets, then as many
  // new and promoted trials as it may run at once (max_concurrent_trials). An experiment whose
  // stored state is lost or whose manifest no longer parses is FAILED with the reason.
  void Round() ABSL_LOCKS_EXCLUDED(mu_);

  // Runs Round on a thread of its own every `period_ms` milliseconds, and sooner: when a job
  // reaches a state that may end a trial's rung or meet a target (HALTED, COMPLETED, FAILED,
  // DELIVERED; read from the Controller's event feed) or is deleted, and when an experiment is
  // submitted or resumed — so that the next trial starts, or the promoted one resumes, within
  // a round of the last one's end rather than up to a period later. StopRounds waits for the
  // round under way. Called by the owner, one at a time.
  void StartRounds(int64_t period_ms);
  void StopRounds();
  // Whether `event` may move a search on (what wakes the rounds).
  static bool MayMoveASearch(const JobEvent& event);

  // A person's actions on experiment `id` (the caller checked that it may see it). NotFound if
  // there is none; errors of the store and of the trials' jobs (Controller).
  //   - Halt: RUNNING -> HALTED, its training trials halted with it; FailedPrecondition if it is
  //     not RUNNING; Unavailable while a trial is being preempted (it cannot be halted until it
  //     is QUEUED again: retry in a second; the experiment stays RUNNING meanwhile).
  //   - Resume: HALTED -> RUNNING, the trials it halted in the middle of a rung resumed (a
  //     trial waiting at the end of its rung is the search's to promote); FailedPrecondition if
  //     it is not HALTED, or if its tenant already has as many RUNNING experiments as it may.
  //   - Delete: halts it if RUNNING, then deletes its trials' jobs (their models and logs) and
  //     the experiment. Cut short, it leaves a HALTED experiment that a second Delete removes.
  absl::Status Halt(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Resume(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Delete(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // OkStatus if `tenant` may have one more experiment (`new_one`) or one more RUNNING; else
  // FailedPrecondition naming the limit. Errors of the store.
  absl::Status CheckLimits(const std::string& tenant, bool new_one)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `e` over the revision it was read at (Store::UpdateExperiment), then publishes it.
  absl::Status Save(ExperimentRecord& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A round now, if StartRounds runs them.
  void WakeRounds();
  // Publishes `e` as stored, or as it was when it is gone (`deleted`).
  void Published(const ExperimentRecord& e, bool deleted = false);
  // The experiment's manifest, parsed once (it never changes).
  absl::StatusOr<const ExperimentSpec*> SpecOf(const ExperimentRecord& e)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One experiment's round (see Round). Errors of the store.
  absl::Status Drive(ExperimentRecord& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports the trials whose job ended its rung, and notes the targets they met. Whether
  // anything changed in `e`.
  absl::StatusOr<bool> ReportResults(ExperimentRecord& e, const ExperimentSpec& spec,
                                     ExperimentSearch& search, const std::vector<JobRecord>& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resumes the trials the stored state promoted whose job still waits (a round cut short
  // between the two writes).
  void ResumePromoted(const ExperimentSpec& spec, const ExperimentSearch& search,
                      const std::vector<JobRecord>& trials) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts and promotes trials while the experiment has room. Errors of the store.
  absl::Status Plan(ExperimentRecord& e, const ExperimentSpec& spec, ExperimentSearch& search,
                    const std::vector<JobRecord>& trials) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the experiment in `state` (HALTED included) with `reason`, halting the trials still
  // training. Unavailable, with nothing stored, while a trial is being preempted.
  absl::Status End(ExperimentRecord& e, ExperimentState state, const std::string& reason,
                   const std::vector<JobRecord>& trials) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store& store_;
  Controller& jobs_;
  const Clock& clock_;
  const ExperimentLimits limits_;
  absl::Mutex mu_;
  // Each experiment's manifest as parsed, by id; stable addresses (a search holds one).
  std::map<std::string, std::unique_ptr<const ExperimentSpec>> specs_ ABSL_GUARDED_BY(mu_);
  // StartRounds' own; the waker is stopped before the loop it wakes.
  std::unique_ptr<ControlLoop> rounds_;
  std::unique_ptr<EventWaker> trial_ends_;
};

// The metric of a trial's job at the end of its rung: the last evaluation among `metrics` (a
// job's points in order) of `metric` ("test_accuracy" or "test_loss"); nullopt without one.
std::optional<double> TrialMetric(const std::vector<MetricRecord>& metrics,
                                  const std::string& metric);

}  // namespace weft
