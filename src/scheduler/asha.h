// Asynchronous successive halving (ASHA; Li et al., "A System for Massively Parallel
// Hyperparameter Tuning", MLSys 2020, Algorithm 2): the searcher of a hyperparameter search
// (an experiment) that decides, each time a trial slot is free, whether to promote a trial to
// the next rung or to start a new one. Pure: no I/O, no clock, no random numbers (a new trial's
// hyperparameters are drawn by the caller from the trial's index), so weftd and weft-sim use it
// unchanged and a searcher rebuilt from its state decides exactly as the one that wrote it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace weft::scheduler {

struct AshaConfig {
  int eta = 3;               // reduction factor η >= 2: the top 1/η of a rung is promoted
  int64_t min_resource = 1;  // r: what a trial trains in rung 0 (the caller's unit: epochs, …)
  int64_t max_resource = 9;  // R: the most any trial trains (the top rung's resource)
  int64_t max_trials = 16;   // trials the search starts at most
  bool maximize = true;      // the metric's direction (accuracy: true; loss: false)
};

// InvalidArgument naming the field (eta, min_resource, max_resource, max_trials) when `config` is
// not a search: η < 2, r < 1, R < r, or no trials.
absl::Status CheckAshaConfig(const AshaConfig& config);

// The rungs' resources: r, r·η, r·η², … while below R, then R (the top rung). With R == r one
// rung: every trial trains to R (random search).
std::vector<int64_t> AshaRungResources(const AshaConfig& config);

// One result of a trial at a rung: its metric after training the rung's resource in all. A failed
// trial has no metric: it ranks below every other and is never promoted.
struct AshaResult {
  int64_t trial = 0;
  std::optional<double> metric;
};

// Everything the searcher decides from; a caller persists it (weftd: in the store) and rebuilds
// the searcher from it after a restart.
struct AshaState {
  int64_t trials_started = 0;                    // trials 0 … trials_started − 1 exist
  std::vector<int> trial_rung;                   // per trial: the rung it was last started in
  std::vector<std::vector<AshaResult>> results;  // per rung, in the order they were reported
  std::vector<std::vector<int64_t>> promoted;    // per rung: the trials promoted out of it
};

struct AshaDecision {
  enum Kind {
    kStart,    // start `trial` (a new one) in rung 0
    kPromote,  // resume `trial` (from its checkpoint) and train it on in `rung`
    kWait,     // nothing to start now: every trial is started and some still train
    kDone,     // the search is over: every trial has its last result
  };
  Kind kind = kWait;
  int64_t trial = -1;
  int rung = 0;
  int64_t resource = 0;  // what `trial` must have trained in all by the end of `rung`
};

class Asha {
 public:
  // `config` must pass CheckAshaConfig; `state` is a fresh search's or one a searcher of the same
  // config returned from state().
  explicit Asha(AshaConfig config, AshaState state = {});

  // What a free trial slot does next: the best promotable trial of the highest rung that has one
  // (a trial in the top ⌊n/η⌋ of the n results of its rung, not promoted yet), else a new trial
  // while fewer than max_trials were started, else wait or, when no trial trains any more, done.
  // A kStart or kPromote is recorded as started: its result is then awaited.
  AshaDecision Next();

  // The result of `trial` at the rung it was last started in (`metric` nullopt: it failed).
  // InvalidArgument for a trial that does not exist; FailedPrecondition when `rung` is not the
  // rung it trains in or that rung's result is already in.
  absl::Status Report(int64_t trial, int rung, std::optional<double> metric);

  // Trials started or promoted whose result is awaited.
  int64_t Running() const;
  // The best of the trials' latest results — each trial's at the highest rung it has one, what
  // its model as it is now scored — with its rung; nullopt while none has a metric. A trial
  // that got worse when promoted ranks by its worse result.
  std::optional<AshaResult> Best(int* rung = nullptr) const;

  const AshaConfig& config() const { return config_; }
  const std::vector<int64_t>& rung_resources() const { return resources_; }
  const AshaState& state() const { return state_; }

 private:
  // Whether `a` ranks above `b` in a rung (a failure below everything; ties by trial index).
  bool Better(const AshaResult& a, const AshaResult& b) const;
  // The best trial of rung `k`'s top ⌊n/η⌋ not promoted yet (and not failed).
  std::optional<int64_t> Promotable(int k) const;
  bool HasResult(int64_t trial, int rung) const;

  AshaConfig config_;
  std::vector<int64_t> resources_;
  AshaState state_;
};

}  // namespace weft::scheduler
