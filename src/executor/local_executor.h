// Runs learners on this host: each in a container (executor/container_launcher.h) whose engine
// process is weftd's child, or, with no container runtime, as a child process of weftd — fork +
// exec (no shell), each in its own session, stdout/stderr appended to a per-learner log file.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "executor/container_launcher.h"
#include "executor/executor.h"
#include "executor/memory_cgroups.h"
#include "executor/spawn.h"

namespace weft {

class LocalExecutor : public Executor {
 public:
  // `learner_binary`: path of the weft-learner executable (a parameter server, LearnerLaunch::
  // ps_server >= 0, runs weft-ps from the same directory). With `cgroups`, each learner with a
  // memory limit runs in a memory cgroup of its own and the kernel holds it to the limit (empty
  // cgroups an earlier weftd left are removed now); without, a watchdog does (Start()). With
  // `containers`, every learner runs in a container (executor/container_launcher.h), and
  // `cgroups` is required: each learner then has a cgroup, limited or not, that its container's
  // cgroups go below; without, learners run unconfined as weftd's user (weftd --runtime none).
  explicit LocalExecutor(std::string learner_binary, const Clock& clock = SystemClock::Get(),
                         std::unique_ptr<MemoryCgroups> cgroups = nullptr,
                         std::unique_ptr<ContainerLauncher> containers = nullptr);
  ~LocalExecutor() override;  // kills every learner still running
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  // Starts the learner in a session of its own (executor/spawn.h) and, when launch.cpuset is
  // set, pins it there (a warning, not an error, where the host does not allow it; a container
  // is pinned by its engine). Internal, naming the step, if it cannot be started; the errors of
  // ContainerLauncher::Prepare for a contained learner. With launch.memory_limit_mb, the limit is
  // held in one of two ways, and an over-limit learner's exit says so (LearnerExit::killed_for)
  // and every process it started goes with it:
  //  - with cgroups, the learner is born in a memory cgroup of its own (it enters it between
  //    fork and exec; what it starts is born inside too; a container's engine puts the
  //    container's cgroups below it), limited to memory_limit_mb; the kernel kills at the limit,
  //    and Reap() learns of it from the cgroup. The cgroup counts all the learner's memory, page
  //    cache included, which the kernel reclaims before it kills.
  //  - otherwise (or if the cgroup cannot be made), every Reap() adds up the resident anonymous
  //    memory (heaps and tensors, not the shared libraries mapped: RssAnon of a lone learner,
  //    each process's Pss_Anon share in a tree) of the learner and every process descended from
  //    it (a command job's program included), and kills them all once that is over the limit.
  //    What a learner allocates and frees between two Reap()s goes unseen.
  absl::StatusOr<int64_t> Start(const LearnerLaunch& launch) override;
  // SIGTERM to the learner's process group (podman passes it on to the container); SIGKILL to
  // it and to every process of its container, found through its cgroup.
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override;
  absl::Status Kill(const std::string& job_id, int rank) override;
  std::vector<LearnerExit> Reap() override;
  int Running(const std::string& job_id) override;
  int Unreaped(const std::string& job_id) override;
  // 127.0.0.1 and a port the kernel reports free right now (bound to port 0, then released, as
  // torchrun does); a port taken in between makes rank 0's rendezvous fail and the job restart.
  // In a container the port is one of the gang's own network namespace.
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string& node) override;
  bool TrainsGangsAsOneLearner() const override { return true; }
  // Checks /proc/<pid>/environ for WEFT_JOB_ID and WEFT_ATTEMPT, so a recycled pid is never
  // adopted. An adopted learner is watched through /proc; its exit status is not known. A
  // contained one joins its attempt's setup again (its channel to weftd reopens).
  absl::Status Adopt(const LearnerLaunch& launch, int64_t pid) override;

  // The environment an unconfined learner gets, as NAME=value strings (exposed for tests and
  // docs): HostLearnerEnvironment (executor/container_launcher.h).
  static std::vector<std::string> LearnerEnvironment(const LearnerLaunch& launch);

  std::string Runtime() const override;
  std::string RuntimeDescription() const override;

 private:
  // In the environment of a contained learner's own process (the engine's, or a command job's
  // supervisor), not its container's: the job's uid, for adopting it after a weftd restart.
  static constexpr char kJobUidVariable[] = "WEFT_JOB_UID";
  // Likewise: the learner's cgroup (its container's cgroups are below it).
  static constexpr char kCgroupVariable[] = "WEFT_CGROUP";

  struct Child {
    LearnerLaunch launch;
    pid_t pid = 0;
    TimeMs kill_at_ms = 0;   // SIGKILL deadline after a Stop; 0 = none
    bool adopted = false;    // started by an earlier weftd: not our child, no waitpid
    std::string killed_for;  // why the executor killed it (LearnerExit::killed_for)
    std::string cgroup;      // its memory cgroup's directory; empty under the watchdog
    int oom_watch = -1;      // MemoryCgroups::WatchOom of `cgroup`
    // Its processes are in a container (a cgroup below `cgroup`), not in its process group.
    bool contained = false;
    std::string container;  // its container's name; "" for a command job's supervisor
  };
  // The cgroup of a learner: <job>.a<attempt>.r<rank>.<n> under the executor's parent.
  std::string CgroupName(const LearnerLaunch& launch);
  // What to run for `launch` whose cgroup is `cgroup` ("" : none): the learner itself, or its
  // container's engine (filling child->contained and container). Errors of the container's
  // preparation.
  absl::StatusOr<SpawnRequest> Plan(const LearnerLaunch& launch, const std::string& cgroup,
                                    Child* child);
  // SIGKILL to `c`'s process group and its container's processes.
  void KillLocked(const Child& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGTERM to `c`'s learner: through its container's init once that runs, else to its process
  // group.
  void TerminateLocked(const Child& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills `c`'s process tree (found through `children`, ChildrenByParent) once its resident
  // anonymous memory together is over the learner's limit.
  static void EnforceMemoryLimit(Child& c, const std::multimap<pid_t, pid_t>& children);
  // Kills `c` and its container once the kernel has killed a process in its cgroup for the limit.
  void CheckCgroup(Child& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the shared-memory object `launch` names as one it may leave behind
  // (LearnerLaunch::leftover_shm: a parameter server's segment), if it is there.
  static void RemoveLeftoverShm(const LearnerLaunch& launch);
  // True if `c` has exited (reaped or not). Fills `status` for our own children.
  static bool Exited(const Child& c, LearnerExit* exit);
  // Removes the cgroups of learners that have exited, killing what is left in them; those that
  // still hold a process are tried again at the next Reap().
  void RemoveCgroups() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string learner_binary_;
  const Clock& clock_;
  const std::unique_ptr<MemoryCgroups> cgroups_;         // null: the watchdog holds memory limits
  const std::unique_ptr<ContainerLauncher> containers_;  // null: learners run unconfined
  absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> exited_cgroups_ ABSL_GUARDED_BY(mu_);  // to remove
  bool cleaned_after_adoption_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> cgroup_serial_{0};  // learners' cgroups made: their names' suffix
};

}  // namespace weft
