// An elastic job's in-place membership change, learner side (issue 14): after a peer is lost
// mid-collective (the step in flight is not applied anywhere it failed), the survivors ask weftd
// for the new generation, re-form the c10d group at its rendezvous under a per-generation key
// prefix, and take the new rank 0's whole training state, so every replica continues from one
// state even if the failed step was applied on some survivors and not on others. No process is
// restarted and no data are re-read.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

// How long a learner tries to regroup in all: weftd settles a new membership within a control
// round of the lost learner's exit, and a group that does not form (a member lost meanwhile) is
// given up for the next generation after kReformWaitMs, as its members are running processes
// that ask at once.
constexpr int64_t kRegroupWaitMs = 60000;
constexpr int64_t kPollMs = 100;

}  // namespace

absl::StatusOr<Membership> AwaitJoin(Reporter& reporter, const LearnerLaunch& launch,
                                     const std::atomic<bool>* stop_requested) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kJoinWaitMs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (stop_requested && stop_requested->load()) {
      return absl::AbortedError("asked to stop before joining");
    }
    ASSIGN_OR_RETURN(Membership m, reporter.Regroup(launch.generation - 1, 0));
    if (m.kind == Membership::Kind::kStop) {
      return absl::AbortedError(absl::StrCat("weftd: ", m.reason));
    }
    if (m.kind == Membership::Kind::kReform) {
      // Rank 0 hands the training state over; a newcomer has none to hand.
      if (m.rank == 0) {
        return absl::UnavailableError(
            absl::StrCat("no learner with the job's state is left in generation ", m.generation));
      }
      return m;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  return absl::DeadlineExceededError("weftd did not let this learner join in time");
}

absl::Status Trainer::OpenAudit() {
  if (rank() != 0 || run_.options().audit_path.empty()) {
    audit_.reset();
    return absl::OkStatus();
  }
  const int64_t step = std::max<int64_t>(run_.progress().step, 0);
  if (!audit_) {
    ASSIGN_OR_RETURN(audit_, AuditLog::Open(run_.options().audit_path));
    spdlog::info("auditing every applied step's samples in {}", run_.options().audit_path);
    if (generation_ > 1 && last_block_.defined() && step > 0) {
      // Rank 0 of a new generation after the one that kept the audit was lost: that one may have
      // died before recording this learner's last step (its allreduce completed here, not
      // there). Roll back to the step before and record it again, from this learner's own copy.
      audit_->Resume(step - 1);
      audit_->BeginEpoch(last_block_epoch_, run_.train().size());
      audit_->Step(step, last_block_epoch_, last_block_);
    }
  }
  // Steps a previous rank 0 recorded after this state's step were not applied on the lineage.
  audit_->Resume(step);
  return absl::OkStatus();
}

std::string RendezvousPrefix(const LearnerLaunch& learner, int64_t generation) {
  const std::string secret = HmacSha256Hex(learner.credential, "gloo-rendezvous").substr(0, 32);
  std::string prefix = absl::StrCat(learner.job_id, "/attempt-", learner.attempt, "/", secret, "/");
  if (generation > 0) absl::StrAppend(&prefix, "gen-", generation, "/");
  return prefix;
}

absl::StatusOr<bool> Trainer::Regroup(const std::string& why) {
  spdlog::warn("{} at step {} in generation {}; asking weftd for the new membership", why,
               run_.progress().step, generation_);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(kRegroupWaitMs);
  int64_t asked = generation_;
  while (std::chrono::steady_clock::now() < deadline) {
    if (run_.StopRequested()) return absl::AbortedError("asked to stop while regrouping");
    ASSIGN_OR_RETURN(Membership m, run_.reporter().Regroup(asked, run_.progress().step));
    if (m.kind == Membership::Kind::kStop) {
      spdlog::info("weftd: {}; leaving the job", m.reason);
      return false;
    }
    if (m.kind == Membership::Kind::kWait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      continue;
    }
    const absl::Status joined = Rejoin(m);
    if (absl::IsUnavailable(joined)) {
      // Another member is gone while the group formed: weftd moves on to a later generation.
      spdlog::warn("generation {} did not form: {}", m.generation, joined.message());
      asked = m.generation;
      continue;
    }
    RETURN_IF_ERROR(joined);
    spdlog::info(
        "generation {}: rank {} of {}, training on from step {} ({} samples into epoch {}) "
        "{:.0f} ms after leaving the last one",
        generation_, rank(), world(), run_.progress().step, epoch_offset_,
        run_.progress().epoch + 1,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return true;
  }
  return absl::DeadlineExceededError(
      absl::StrCat("weftd did not settle a new generation within ", kRegroupWaitMs / 1000, " s"));
}

absl::Status Trainer::Rejoin(const Membership& m) {
  RETURN_IF_ERROR(dp_->Reform(m.rendezvous_host, m.rendezvous_port, m.rank, m.world_size,
                              run_.options().rendezvous_timeout_ms,
                              RendezvousPrefix(run_.options().learner, m.generation),
                              std::min(run_.options().rendezvous_timeout_ms, kReformWaitMs)));
  generation_ = m.generation;
  return TakeRank0State();
}

absl::Status Trainer::TakeRank0State() {
  // Every member takes rank 0's state: survivors may differ by the step that failed (applied
  // where its allreduce completed before the loss, not elsewhere), and a newcomer has none.
  std::string state;
  if (rank() == 0) {
    ASSIGN_OR_RETURN(state, SerializeState());
  }
  ASSIGN_OR_RETURN(state, dp_->BroadcastBytes(state));
  if (rank() != 0) {
    const int64_t checkpointed = run_.last_checkpoint_step();
    const bool checkpointed_pending = last_checkpoint_eval_pending_;
    RETURN_IF_ERROR(RestoreFromBytes(state));
    run_.set_last_checkpoint_step(checkpointed);  // this learner has not written that checkpoint
    last_checkpoint_eval_pending_ = checkpointed_pending;
    last_block_ = torch::Tensor();  // rank 0's step, which rank 0 recorded
  }
  // Each learner keeps its batch; the rate follows the world size (training.lr_scaling).
  const double lr = run_.spec().ScaledLearningRate(world());
  for (torch::optim::OptimizerParamGroup& group : optimizer_->param_groups()) {
    group.options().set_lr(lr);
  }
  RETURN_IF_ERROR(OpenAudit());
  Plan();
  return absl::OkStatus();
}

}  // namespace weft::train
