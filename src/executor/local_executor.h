// Runs learners as child processes of weftd on this host: posix_spawn (no shell), each in its
// own process group, stdout/stderr appended to a per-learner log file.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "executor/executor.h"

namespace weft {

class LocalExecutor : public Executor {
 public:
  // `learner_binary`: path of the weft-learner executable.
  explicit LocalExecutor(std::string learner_binary, const Clock& clock = SystemClock::Get());
  ~LocalExecutor() override;  // kills every learner still running
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  // Starts the learner in its own process group and, when launch.cpuset is set, pins it there
  // with sched_setaffinity (a warning, not an error, where the host does not allow it). With
  // launch.memory_limit_mb, every Reap() adds up the resident anonymous memory (heaps and
  // tensors, not the shared libraries mapped: RssAnon of a lone learner, each process's Pss_Anon
  // share in a tree) of the learner and every process descended from it (a command job's
  // program included), and kills them all once that is over the limit; the learner's exit then
  // says so.
  absl::StatusOr<int64_t> Start(const LearnerLaunch& launch) override;
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override;
  std::vector<LearnerExit> Reap() override;
  int Running(const std::string& job_id) override;
  // 127.0.0.1 and a port the kernel reports free right now (bound to port 0, then released, as
  // torchrun does); a port taken in between makes rank 0's rendezvous fail and the job restart.
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string& node) override;
  // Checks /proc/<pid>/environ for WEFT_JOB_ID and WEFT_ATTEMPT, so a recycled pid is never
  // adopted. An adopted learner is watched through /proc; its exit status is not known.
  absl::Status Adopt(const LearnerLaunch& launch, int64_t pid) override;

  // The environment a learner gets, as NAME=value strings (exposed for tests and docs).
  static std::vector<std::string> LearnerEnvironment(const LearnerLaunch& launch);

 private:
  static void Pin(int64_t pid, const std::vector<int>& cpus);
  struct Child {
    LearnerLaunch launch;
    pid_t pid = 0;
    TimeMs kill_at_ms = 0;   // SIGKILL deadline after a Stop; 0 = none
    bool adopted = false;    // started by an earlier weftd: not our child, no waitpid
    std::string killed_for;  // why the executor killed it (LearnerExit::killed_for)
  };
  // Kills `c`'s process tree (found through `children`, ChildrenByParent) once its resident
  // anonymous memory together is over the learner's limit.
  static void EnforceMemoryLimit(Child& c, const std::multimap<pid_t, pid_t>& children);
  // True if `c` has exited (reaped or not). Fills `status` for our own children.
  static bool Exited(const Child& c, LearnerExit* exit);

  std::string learner_binary_;
  const Clock& clock_;
  absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft
