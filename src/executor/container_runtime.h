// The container every learner runs in, and the engine that runs it. A ContainerSpec says what
// one container runs and everything it may reach (its image, mounts, network, user, limits); a
// ContainerRuntime turns a spec into the command that runs the container in the foreground, so
// that the executor (or a command job's supervisor) runs that command as the learner's process:
// it exits with the program's status, 128 + N when signal N killed the program.
//
// Two runtimes: podman with runc (PodmanRuntime, the default), and bubblewrap (BwrapRuntime) for
// hosts without podman, chosen by the admin (weftd --runtime). docs/security.md says what each
// one holds a learner to.
//
// Thread-safety: a runtime is immutable once constructed; Command() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

// A host path seen in the container. Learners see their job's files at the same paths as the
// host, so that what they report (a checkpoint's path) means the same on both sides.
struct ContainerMount {
  std::string source;  // on the host
  std::string target;  // in the container
  bool read_only = true;
};

struct ContainerSpec {
  // Unique on this host while it runs: weft-<job>-a<attempt>-r<rank>
  // (executor/learner_container.h).
  std::string name;
  // The image (podman's reference; ignored by bubblewrap, whose root is the host's, read-only).
  std::string image;
  std::vector<std::string> argv;  // argv[0] is looked up in the image's PATH
  // The program's whole environment, NAME -> value: nothing else of the caller's reaches it.
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<ContainerMount> mounts;
  std::string work_dir;  // its working directory ("" : /)
  uid_t uid = 65534;     // the job's own uid (executor/job_uids.h); gid is the same number
  // A network namespace to join (a bind-mounted nsfs file, executor/network_namespaces.h): the
  // one its gang shares, with only loopback. Empty: a namespace of its own with only loopback.
  // `host_network`: the host's network instead (Slurm learners, which reach weftd over TCP).
  std::string network_namespace;
  bool host_network = false;
  // Its cgroups go below this path of every hierarchy (relative to the hierarchy's root, e.g.
  // "/weftd/weft-1a2b/job-x.a1.r0"); empty: the engine's default.
  std::string cgroup_parent;
  int64_t memory_bytes = 0;  // its own memory limit; 0: none of its own (the parent's holds)
  double cpus = 0;           // CPU time, in CPUs (cfs quota); 0: no limit
  std::vector<int> cpuset;   // CPUs it may run on; empty: any
  int64_t pids_limit = 0;    // processes and threads at once; 0: the engine's default
  std::vector<std::string> devices;  // CDI device names, e.g. nvidia.com/gpu=0
  // The engine process's standard input reaches the program's (a command job's code archive,
  // read by tar); otherwise the program reads /dev/null.
  bool stdin_input = false;
  // Host directories it must not see (weftd's data directory): hidden under an empty tmpfs,
  // before its mounts. For bubblewrap, whose root is the host's; an image holds none of them.
  std::vector<std::string> hidden;
  // Labels the engine keeps with the container (weft.job, weft.attempt, weft.rank).
  std::vector<std::pair<std::string, std::string>> labels;
  // Whether the engine records the host pid of the container's init once it runs, so that
  // ContainerRuntime::SignalInit can reach it (the caller then calls Forget when it is done).
  bool record_init_pid = false;
};

// What to run: execve(argv[0], argv, env). `join_network_namespace`: the caller must setns()
// into it before exec (bubblewrap cannot join one itself); empty for podman, which does.
struct RuntimeCommand {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value
  std::string join_network_namespace;
};

class ContainerRuntime {
 public:
  virtual ~ContainerRuntime() = default;
  // "podman" or "bwrap" (weftd --runtime, GET /v1/nodes).
  virtual std::string Name() const = 0;
  // One line for weftd's log and the API: the engine, its version and what it enforces.
  virtual std::string Describe() const = 0;
  // The command that runs `spec` in the foreground. InvalidArgument for a spec it cannot run (a
  // relative mount path, a name with characters outside [A-Za-z0-9_.-]).
  virtual absl::StatusOr<RuntimeCommand> Command(const ContainerSpec& spec) const = 0;
  // Whether killing the runtime's process kills the container (bubblewrap: it dies with its
  // parent); false for podman, whose container outlives the `podman run` process and is killed
  // through its cgroup.
  virtual bool ContainerDiesWithProcess() const = 0;
  // Whether the container's cgroups go where ContainerSpec::cgroup_parent says (podman), or the
  // runtime's process must be born in the learner's cgroup itself (bubblewrap).
  virtual bool PlacesCgroups() const = 0;
  // The child cgroup the engine keeps for itself beside a container's ("" : none), whose
  // processes must outlive the container to clean it up.
  virtual std::string EngineCgroup() const { return ""; }
  // Whether containers run on an image (podman), or on the host's root read-only (bubblewrap):
  // then a learner's binaries are the host's own, at their own paths.
  virtual bool UsesImage() const { return true; }
  // Whether the runtime's process passes SIGTERM on to the program (podman's sig-proxy). If not
  // (bubblewrap), it must ignore SIGTERM itself, and the program, in its process group, gets it.
  virtual bool ForwardsSigterm() const { return true; }

  // What SignalInit did.
  enum class Signalled {
    kInit,        // the container's init has it (and passes it on to the program)
    kEnded,       // the container ran and has ended: nothing was signalled
    kNotStarted,  // not running yet, or the runtime cannot tell: signal the runtime's process
  };
  // Sends `signal` to the init of container `name` (started with record_init_pid), not to the
  // runtime's process. That process then exits with the program's own status even when the
  // program died first: podman's client, signalled after its container ended, reports the
  // signal it got (143) instead of the container's status (137 for a SIGKILL).
  virtual Signalled SignalInit(const std::string& name, int signal) const {
    (void)name;
    (void)signal;
    return Signalled::kNotStarted;
  }
  // Drops what the runtime kept for SignalInit about container `name`, whose process has exited.
  virtual void Forget(const std::string& name) const { (void)name; }
};

// Podman (with runc: crun refuses the hybrid cgroup layout of these hosts) as root. Every
// container: --init (catatonit forwards SIGTERM), all capabilities dropped, no-new-privileges,
// weft's seccomp profile (SeccompProfile), a read-only root with private /tmp, /var/tmp and /run,
// the job's uid, its own PID, IPC, UTS and mount namespaces, --network none or its gang's
// namespace, its pids/cpu limits, the output passed straight to the runtime process's own
// (--log-driver passthrough), the environment only what the spec names (`--env NAME`, the values
// in the podman process's environment, never on a command line).
class PodmanRuntime : public ContainerRuntime {
 public:
  struct Options {
    std::string podman = "/usr/bin/podman";
    // Where weft keeps its own engine configuration: containers.conf (CONTAINERS_CONF: runc,
    // rlimits this host allows) and seccomp.json. Owner-only; never mounted into a container.
    std::string config_dir;
  };
  // Writes containers.conf and seccomp.json into options.config_dir (from the engine's own
  // profile, /usr/share/containers/seccomp.json). FailedPrecondition, saying what to install,
  // when podman or its profile is missing or weftd is not root; Internal if a file cannot be
  // written.
  static absl::StatusOr<std::unique_ptr<PodmanRuntime>> Create(Options options);
  // The runtime weftd set up with Create (its files in options.config_dir), for a command job's
  // supervisor, which starts its program's container with it. FailedPrecondition when podman or
  // weft's seccomp profile is not there.
  static absl::StatusOr<std::unique_ptr<PodmanRuntime>> Open(Options options);

  std::string Name() const override { return "podman"; }
  std::string Describe() const override;
  absl::StatusOr<RuntimeCommand> Command(const ContainerSpec& spec) const override;
  bool ContainerDiesWithProcess() const override { return false; }
  bool PlacesCgroups() const override { return true; }
  std::string EngineCgroup() const override { return "conmon"; }
  // Through the pid podman wrote with --pidfile (under config_dir/pids), once that pid is still a
  // container's init (its own pid namespace's pid 1, /run/podman-init).
  Signalled SignalInit(const std::string& name, int signal) const override;
  void Forget(const std::string& name) const override;

  // The environment of every podman process weft runs (PATH, CONTAINERS_CONF).
  std::vector<std::string> EngineEnvironment() const;
  // The command that kills container `name` at once (podman kill), if it still runs.
  RuntimeCommand KillCommand(const std::string& name) const;
  // Whether `image` holds `program` as an executable file: a path, or a name looked up in the
  // directories of `path` (PATH's form), each resolved inside the image (its links too). OK when
  // it does; NotFound saying where it looked when it does not; Unavailable when the image cannot
  // be looked into (then nothing is known). Needs root (podman image mount).
  absl::Status HasProgram(const std::string& image, const std::string& program,
                          const std::string& path) const;
  const Options& options() const { return options_; }
  const std::string& version() const { return version_; }

 private:
  PodmanRuntime(Options options, std::string version)
      : options_(std::move(options)), version_(std::move(version)) {}
  // Where podman writes container `name`'s init pid (record_init_pid).
  std::string InitPidFile(const std::string& name) const;
  Options options_;
  std::string version_;
};

// Debian's bubblewrap as root, for hosts without podman (weftd --runtime bwrap): the host's root
// read-only, weftd's data directory hidden under an empty tmpfs with only the job's own files
// bound back, private /tmp, /var/tmp, /run, /home and /root, its own PID, IPC, UTS and cgroup
// namespaces, its gang's network namespace (joined with setns before bubblewrap starts) or one of
// its own with only loopback, the job's uid with no capabilities and no-new-privileges (setpriv),
// and RLIMIT_NPROC as its pids limit (prlimit: per uid, which is the job's own). No seccomp filter
// of weft's (bubblewrap takes only compiled ones), no CPU quota (its cores are its node's
// cpuset), and its memory is its learner's cgroup's, which its process is born in.
class BwrapRuntime : public ContainerRuntime {
 public:
  // FailedPrecondition when bubblewrap or util-linux's setpriv and prlimit are missing, or this
  // process is not root (a job's uid, and joining a gang's network, need root).
  static absl::StatusOr<std::unique_ptr<BwrapRuntime>> Create();

  std::string Name() const override { return "bwrap"; }
  std::string Describe() const override;
  absl::StatusOr<RuntimeCommand> Command(const ContainerSpec& spec) const override;
  bool ContainerDiesWithProcess() const override { return true; }
  bool PlacesCgroups() const override { return false; }
  bool UsesImage() const override { return false; }
  bool ForwardsSigterm() const override { return false; }

 private:
  BwrapRuntime() = default;
};

// weft's seccomp profile for podman: the engine's own (`engine_profile`, the JSON of
// /usr/share/containers/seccomp.json) with three changes — unshare and clone may not make a user
// namespace (EPERM; the engine's allows it, and with it the kernel's user-namespace surface),
// clone3 answers ENOSYS so that the C library falls back to clone, whose flags the filter can
// read, and ioctl may not push input into a terminal (TIOCSTI) or reach the console (TIOCLINUX).
// InvalidArgument if `engine_profile` is not such a profile.
absl::StatusOr<std::string> SeccompProfile(const std::string& engine_profile);

// containers.conf for weft's podman processes: runc, and nofile/nproc ulimits within what this
// process may set (its hard RLIMIT_NOFILE, and podman's own nproc ceiling of 32768): root on
// these hosts lacks CAP_SYS_RESOURCE, and podman's defaults (1048576) fail there.
std::string ContainersConf();

}  // namespace weft
