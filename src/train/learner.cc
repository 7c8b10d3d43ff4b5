#include "train/learner.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/failpoint.h"
#include "common/files.h"
#include "common/logging.h"
#include "train/allocator.h"
#include "train/coordinator_reporter.h"
#include "train/training_loop.h"

namespace weft::train {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  int64_t v;
  return absl::SimpleAtoi(Env(name), &v) ? v : fallback;
}

}  // namespace

int RunLearnerFromEnvironment() {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ learner: %v");
  spdlog::flush_on(spdlog::level::info);
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  LoopOptions options;
  options.job_id = Env("WEFT_JOB_ID");
  options.rank = static_cast<int>(EnvInt("RANK", 0));
  options.world_size = static_cast<int>(EnvInt("WORLD_SIZE", 1));
  options.rendezvous_host = Env("MASTER_ADDR", "127.0.0.1");
  options.rendezvous_port = static_cast<int>(EnvInt("MASTER_PORT", 0));
  options.result_dir = Env("RESULT_DIR");
  options.checkpoint_dir = Env("CHECKPOINT_DIR");
  options.stop_requested = &g_stop;
  const int64_t attempt = EnvInt("WEFT_ATTEMPT", 1);
  // Fault injection: a learner failpoint fires in the first attempt only, and with
  // WEFT_LEARNER_FAILPOINT_RANK=r only in rank r.
  const int64_t failpoint_rank = EnvInt("WEFT_LEARNER_FAILPOINT_RANK", -1);
  SetFailpointVariable("WEFT_LEARNER_FAILPOINT",
                       attempt == 1 && (failpoint_rank < 0 || failpoint_rank == options.rank));
  const std::string spec_path = Env("WEFT_JOB_SPEC");
  const std::string coordinator = Env("WEFT_COORDINATOR");
  if (options.job_id.empty() || spec_path.empty() || coordinator.empty() ||
      options.result_dir.empty() || (options.world_size > 1 && options.rendezvous_port <= 0)) {
    spdlog::error("weft-learner is started by weftd: WEFT_JOB_ID, WEFT_JOB_SPEC, "
                  "WEFT_COORDINATOR and RESULT_DIR must be set (and MASTER_PORT when WORLD_SIZE > 1)");
    return kExitUserError;
  }
  spdlog::info("job {} rank {}/{} attempt {} pid {}", options.job_id, options.rank,
               options.world_size, attempt, ::getpid());
  spdlog::info("{}", TuneAllocatorForTraining());

  CoordinatorReporter reporter(coordinator, options.job_id, options.rank, attempt,
                               Env("WEFT_JOB_CREDENTIAL"));
  absl::Status registered = reporter.Register(options.world_size);
  if (!registered.ok()) {
    spdlog::error("{}", registered.message());
    return absl::IsFailedPrecondition(registered) ? kExitStopped : kExitInternal;
  }

  auto text = ReadFile(spec_path);
  absl::StatusOr<JobSpec> spec =
      text.ok() ? ParseManifest(*text) : absl::StatusOr<JobSpec>(text.status());
  if (!spec.ok()) {
    std::string reason = absl::StrCat("cannot read the job spec: ", spec.status().message());
    spdlog::error("{}", reason);
    reporter.Finish(false, reason, 0);
    return kExitUserError;
  }
  options.spec = *spec;

  absl::StatusOr<LoopResult> result = RunTraining(options, reporter);
  if (!result.ok()) {
    const absl::Status& s = result.status();
    bool user_error = absl::IsInvalidArgument(s) || absl::IsNotFound(s);
    std::string reason = std::string(s.message());
    spdlog::error("training failed: {}", reason);
    reporter.Finish(false, reason, 0);
    return user_error ? kExitUserError : kExitInternal;
  }
  if (result->stopped) {
    spdlog::info("stopped at the request of weftd or a signal");
    return kExitStopped;
  }
  spdlog::info("finished: {}", result->reason);
  reporter.Finish(true, result->reason, result->best_test_accuracy);
  return kExitOk;
}

}  // namespace weft::train
