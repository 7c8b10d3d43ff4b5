// Runs learners as child processes of weftd on this host: fork + exec (no shell), each in its
// own process group, stdout/stderr appended to a per-learner log file.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "executor/executor.h"
#include "executor/memory_cgroups.h"

namespace weft {

class LocalExecutor : public Executor {
 public:
  // `learner_binary`: path of the weft-learner executable (a parameter server, LearnerLaunch::
  // ps_server >= 0, runs weft-ps from the same directory). With `cgroups`, each learner with a
  // memory limit runs in a memory cgroup of its own and the kernel holds it to the limit (empty
  // cgroups an earlier weftd left are removed now); without, a watchdog does (Start()).
  explicit LocalExecutor(std::string learner_binary, const Clock& clock = SystemClock::Get(),
                         std::unique_ptr<MemoryCgroups> cgroups = nullptr);
  ~LocalExecutor() override;  // kills every learner still running
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  // Starts the learner in its own process group and, when launch.cpuset is set, pins it there
  // with sched_setaffinity before exec (a warning, not an error, where the host does not allow
  // it). Internal, naming the step, if it cannot be started. With
  // launch.memory_limit_mb, the limit is held in one of two ways, and an over-limit learner's
  // exit says so (LearnerExit::killed_for) and every process it started goes with it:
  //  - with cgroups, the learner is born in a memory cgroup of its own (it enters it between
  //    fork and exec; what it starts is born inside too), limited to memory_limit_mb; the kernel
  //    kills at the limit, and Reap() reads the cgroup's OOM kills. The cgroup counts all the
  //    learner's memory, page cache included, which the kernel reclaims before it kills.
  //  - otherwise (or if the cgroup cannot be made), every Reap() adds up the resident anonymous
  //    memory (heaps and tensors, not the shared libraries mapped: RssAnon of a lone learner,
  //    each process's Pss_Anon share in a tree) of the learner and every process descended from
  //    it (a command job's program included), and kills them all once that is over the limit.
  //    What a learner allocates and frees between two Reap()s goes unseen.
  absl::StatusOr<int64_t> Start(const LearnerLaunch& launch) override;
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override;
  absl::Status Kill(const std::string& job_id, int rank) override;
  std::vector<LearnerExit> Reap() override;
  int Running(const std::string& job_id) override;
  // 127.0.0.1 and a port the kernel reports free right now (bound to port 0, then released, as
  // torchrun does); a port taken in between makes rank 0's rendezvous fail and the job restart.
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string& node) override;
  bool TrainsGangsAsOneLearner() const override { return true; }
  // Checks /proc/<pid>/environ for WEFT_JOB_ID and WEFT_ATTEMPT, so a recycled pid is never
  // adopted. An adopted learner is watched through /proc; its exit status is not known.
  absl::Status Adopt(const LearnerLaunch& launch, int64_t pid) override;

  // The environment a learner gets, as NAME=value strings (exposed for tests and docs).
  static std::vector<std::string> LearnerEnvironment(const LearnerLaunch& launch);

 private:
  // One learner process, as fork + exec: the child enters its memory cgroup and pins itself to
  // its cpus before exec, so nothing it runs is ever outside either.
  struct SpawnRequest {
    const char* binary;
    char* const* argv;
    char* const* envp;
    const char* log_path;      // stdout and stderr, appended, created 0600
    std::vector<int> cpuset;   // empty: not pinned
    std::string cgroup_procs;  // the cgroup's cgroup.procs file; empty: none
  };
  struct SpawnResult {
    enum Step { kNone, kFork, kCgroup, kStdio, kExec };
    static const char* StepName(Step step);
    pid_t pid = 0;
    Step failed_step = kNone;  // the learner did not start
    int error = 0;             // errno of failed_step
    int pin_error = 0;         // errno of a failed sched_setaffinity (it started unpinned)
  };
  static SpawnResult Spawn(const SpawnRequest& req);
  struct Child {
    LearnerLaunch launch;
    pid_t pid = 0;
    TimeMs kill_at_ms = 0;   // SIGKILL deadline after a Stop; 0 = none
    bool adopted = false;    // started by an earlier weftd: not our child, no waitpid
    std::string killed_for;  // why the executor killed it (LearnerExit::killed_for)
    std::string cgroup;      // its memory cgroup's directory; empty under the watchdog
  };
  // Kills `c`'s process tree (found through `children`, ChildrenByParent) once its resident
  // anonymous memory together is over the learner's limit.
  static void EnforceMemoryLimit(Child& c, const std::multimap<pid_t, pid_t>& children);
  // Kills `c`'s cgroup once the kernel has killed a process in it for the limit.
  void CheckCgroup(Child& c);
  // Removes the shared-memory segment of the parameter server of `launch`'s job attempt, if
  // rank 0 (its process) left one behind (docs/design.md, "Learners on the server").
  static void RemoveParameterServer(const LearnerLaunch& launch);
  // True if `c` has exited (reaped or not). Fills `status` for our own children.
  static bool Exited(const Child& c, LearnerExit* exit);
  // Removes the cgroups of learners that have exited, killing what is left in them; those that
  // still hold a process are tried again at the next Reap().
  void RemoveCgroups() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string learner_binary_;
  const Clock& clock_;
  const std::unique_ptr<MemoryCgroups> cgroups_;  // null: the watchdog holds memory limits
  absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> exited_cgroups_ ABSL_GUARDED_BY(mu_);  // to remove
};

}  // namespace weft
