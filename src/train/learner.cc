#include "train/learner.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/failpoint.h"
#include "common/files.h"
#include "common/logging.h"
#include "job/audit.h"
#include "job/layout.h"
#include "job/learner_contract.h"
#include "train/allocator.h"
#include "train/command_job.h"
#include "train/coordinator_reporter.h"
#include "train/training_loop.h"

namespace weft::train {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// Fault injection: a learner failpoint fires in the first attempt only, and with
// WEFT_LEARNER_FAILPOINT_RANK=r only in rank r.
void SetUpFailpoints(int64_t attempt, int rank) {
  int64_t failpoint_rank = -1;
  if (const char* r = std::getenv("WEFT_LEARNER_FAILPOINT_RANK")) {
    if (!absl::SimpleAtoi(r, &failpoint_rank)) failpoint_rank = -1;
  }
  SetFailpointVariable("WEFT_LEARNER_FAILPOINT",
                       attempt == 1 && (failpoint_rank < 0 || failpoint_rank == rank));
}

// Where rank 0 appends the data audit: set when weftd ran with WEFT_LEARNER_AUDIT=1.
std::string AuditPathFromEnvironment(const LearnerLaunch& launch) {
  const char* audit = std::getenv(kAuditEnv);
  if (audit == nullptr || std::string(audit) != "1" || launch.log_dir.empty()) return "";
  return AuditPath(launch.log_dir);
}

// A rank of a gang that trains as one learner other than rank 0: it holds its place in the gang
// (registered, heartbeating, its exit seen like any learner's) and trains nothing, until weftd or
// a signal stops the gang.
int StandBy(const LearnerLaunch& launch, const Reporter& reporter) {
  spdlog::info(
      "standing by: the gang's {} learners are all on node {}, so rank 0 trains for them as one "
      "learner; this process holds rank {}'s place until the gang stops",
      launch.learners_as_one, launch.node, launch.rank);
  while (!g_stop.load() && reporter.KeepRunning()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  spdlog::info("stopped at the request of weftd or a signal");
  return kLearnerExitStopped;
}

// Rank 0 of a gang that trains as one learner: trains by JobSpec::AsOneLearner, alone.
void TrainForTheGang(LoopOptions* options) {
  const int one = options->learner.learners_as_one;
  options->spec = options->spec.AsOneLearner(one);
  options->learner.world_size = 1;
  spdlog::info(
      "the gang's {} learners are all on node {}: this one trains for them with {} threads at "
      "their global batch {} and learning rate {:g} (resources.gang_on_one_host: one_learner)",
      one, options->learner.node, options->spec.EffectiveThreads(),
      options->spec.training.batch_size, options->spec.EffectiveLearningRate());
}

// SIGTERM and SIGINT ask for a stop (g_stop). A write to a gang peer that is gone fails with
// EPIPE, which the learner handles as the peer lost (it checkpoints and exits with the reason),
// rather than killing it: SIGPIPE is ignored. What it starts gets the default back
// (command_process.cc, command_event_reader.cc, common/subprocess.cc).
void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int RunLearnerFromEnvironment() {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ learner: %v");
  spdlog::flush_on(spdlog::level::info);
  InstallSignalHandlers();

  absl::StatusOr<LearnerLaunch> launch =
      LearnerLaunchFromEnvironment([](const char* name) { return std::getenv(name); });
  if (!launch.ok()) {
    spdlog::error("{}", launch.status().message());
    return kLearnerExitUserError;
  }
  LoopOptions options;
  options.learner = *launch;
  options.stop_requested = &g_stop;
  options.audit_path = AuditPathFromEnvironment(*launch);
  const int64_t attempt = launch->attempt;
  SetUpFailpoints(attempt, options.learner.rank);
  spdlog::info("job {} rank {}/{} attempt {} pid {}", options.learner.job_id, options.learner.rank,
               options.learner.world_size, attempt, ::getpid());
  spdlog::info("{}", TuneAllocatorForTraining());

  std::string ca_pem;
  if (!launch->coordinator_ca_path.empty()) {
    auto pem = ReadFile(launch->coordinator_ca_path);
    if (!pem.ok()) {
      spdlog::error("cannot read {} {}: {}", learner_env::kCoordinatorCa,
                    launch->coordinator_ca_path, pem.status().message());
      return kLearnerExitRetry;
    }
    ca_pem = *pem;
  }
  CoordinatorReporter reporter(launch->coordinator_address, options.learner.job_id,
                               options.learner.rank, attempt, launch->credential, ca_pem);
  // A learner joining a running elastic job registers without a world size: a loss while it
  // starts may change the job's, and Regroup tells it the one to join.
  absl::Status registered = reporter.Register(
      options.learner.generation > 1 ? 0 : options.learner.world_size, launch->gpus);
  if (!registered.ok()) {
    spdlog::error("{}", registered.message());
    return absl::IsFailedPrecondition(registered) ? kLearnerExitStopped : kLearnerExitRetry;
  }

  auto text = ReadFile(launch->spec_path);
  absl::StatusOr<JobSpec> spec =
      text.ok() ? ParseManifest(*text) : absl::StatusOr<JobSpec>(text.status());
  if (!spec.ok()) {
    std::string reason = absl::StrCat("cannot read the job spec: ", spec.status().message());
    spdlog::error("{}", reason);
    reporter.Finish(false, reason, 0);
    return kLearnerExitUserError;
  }
  options.spec = *spec;
  const bool command = spec->IsCommandJob();
  if (launch->learners_as_one > 1) {
    if (options.learner.rank != 0) return StandBy(*launch, reporter);
    TrainForTheGang(&options);
  }

  absl::StatusOr<LoopResult> result =
      command ? RunCommandJob(options, reporter) : RunTraining(options, reporter);
  if (!result.ok()) {
    const absl::Status& s = result.status();
    // A command job that cannot be sandboxed fails (FailedPrecondition): a restart would too.
    bool user_error = absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
                      (command && absl::IsFailedPrecondition(s));
    std::string reason = std::string(s.message());
    spdlog::error("training failed: {}", reason);
    reporter.Finish(false, reason, 0);
    return user_error ? kLearnerExitUserError : kLearnerExitRetry;
  }
  if (result->stopped) {
    spdlog::info("stopped at the request of weftd or a signal");
    return kLearnerExitStopped;
  }
  spdlog::info("finished: {}", result->reason);
  reporter.Finish(true, result->reason, result->best_test_accuracy);
  return kLearnerExitOk;
}

}  // namespace weft::train
