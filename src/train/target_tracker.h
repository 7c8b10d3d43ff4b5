// The two-tier accuracy targets of one training run (TRADL's deliver and complete targets), kept
// the same way by every loop: the allreduce gang (Trainer), the parameter server (PsTrainer) and
// a tenant's own program (CommandJob). Each evaluation's test accuracy goes through Observe,
// which says whether this is the moment to hand back the delivered model (the first accuracy at
// or above `deliver`) and whether the run may stop (at or above `complete`). The best and last
// accuracies and whether the model was delivered are part of a checkpoint (Restore).
//
// Thread-safety: none; one loop owns it.
#pragma once

#include <optional>
#include <string>

#include "job/job_spec.h"

namespace weft::train {

class TargetTracker {
 public:
  explicit TargetTracker(TargetSpec targets) : targets_(std::move(targets)) {}

  // What one evaluation decided.
  struct Decision {
    bool deliver = false;   // export the delivered model now, then MarkDelivered()
    bool complete = false;  // the complete target is met: training may end
  };
  // Records the test accuracy (in [0, 1]) of one evaluation.
  Decision Observe(double accuracy);
  // Whether an accuracy of `accuracy` would have the model delivered now (a command job's
  // program announces each model with its accuracy; only such a model can be the delivered one).
  bool WouldDeliver(double accuracy) const;
  // The delivered model is written and committed: it is never delivered again in this run.
  void MarkDelivered() { delivered_ = true; }
  // The state a checkpoint kept (the best and last accuracies, whether a model was delivered).
  void Restore(double best, double last, bool delivered);
  // Forgets every evaluation (a run that starts from the beginning).
  void Reset() { Restore(0, 0, false); }

  // "target met: test_accuracy 0.9012 >= 0.9" once the complete target was met, else `otherwise`.
  std::string FinishReason(const std::string& otherwise) const;
  // Why a loop that trained its whole budget of `epochs` ended: FinishReason with "budget
  // exhausted, best 0.8830 (target 0.9)" when there is a complete target, "budget exhausted: 5
  // epochs, test_accuracy 0.8830" (the last) when there is none.
  std::string BudgetReason(int epochs) const;

  double best() const { return best_; }
  double last() const { return last_; }
  bool delivered() const { return delivered_; }
  bool complete_met() const { return complete_met_.has_value(); }

 private:
  TargetSpec targets_;
  double best_ = 0;
  double last_ = 0;
  bool delivered_ = false;
  std::optional<double> complete_met_;  // the first accuracy at or above `complete`
};

}  // namespace weft::train
