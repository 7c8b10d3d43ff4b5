// Kernel-enforced memory limits for learners: one memory cgroup per learner, under cgroup v1 or
// v2, whichever the host gives this process. The kernel then stops a learner at its limit the
// moment it allocates past it, where a watchdog that polls /proc sees it only at its next look
// (and a burst between two looks not at all).
//
// Layout: `parent` is a directory weftd owns in the memory hierarchy (v1:
// <memory mount>/<weftd's cgroup>/weft-<tag>; v2: <cgroup2 mount>/<weftd's cgroup>/weft-<tag>,
// after weftd has moved itself into a leaf beside it so that its own cgroup may delegate the
// controller — the cgroup v2 "no internal processes" rule). Each learner gets
// <parent>/<job>.a<attempt>.r<rank>, and everything it starts stays in it.
//
// Thread-safety: the methods touch only the files of the cgroup they are given; safe to call from
// several threads for different cgroups.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

class MemoryCgroups {
 public:
  enum class Version { kV1, kV2 };

  // Finds the memory controller of this process and opens weft-<tag> under its cgroup (see the
  // layout above). `tag` tells apart weftd processes that share a cgroup (e.g. a hash of the data
  // directory). FailedPrecondition, saying why, where the host offers none this process may use:
  // no memory controller mounted, its directory not writable (not root and not delegated), or in
  // v2 the controller not available to (or not delegable from) weftd's cgroup.
  static absl::StatusOr<std::unique_ptr<MemoryCgroups>> ForThisProcess(const std::string& tag);

  // Opens `parent` (created if missing; in v2 the memory controller is enabled for its children).
  // Internal if it cannot be created or the controller enabled.
  static absl::StatusOr<std::unique_ptr<MemoryCgroups>> Open(Version version, std::string parent);

  // Creates (or reuses, after an earlier weftd) the cgroup `name` under the parent, limited to
  // `limit_bytes` bytes of memory (<= 0: not limited) and no swap beyond it (v1:
  // memory.limit_in_bytes and, where swap is accounted, memory.memsw.limit_in_bytes; v2:
  // memory.max, memory.swap.max 0, and memory.oom.group 1 so an out-of-memory kill takes the whole
  // learner). Returns its directory. InvalidArgument for a name with '/' or starting with '.';
  // Internal if a file cannot be written.
  absl::StatusOr<std::string> Create(const std::string& name, int64_t limit_bytes) const;

  // Moves process `pid` (all its threads) into the cgroup at `dir`; what it starts later is born
  // there. Internal with the system's reason if the kernel refuses.
  absl::Status Join(const std::string& dir, pid_t pid) const;

  // How many processes in `dir` the kernel has killed for its limit (v1 memory.oom_control and
  // v2 memory.events, "oom_kill N"); 0 if unknown.
  int64_t OomKills(const std::string& dir) const;

  // The most memory the cgroup has used, in bytes (v1 memory.max_usage_in_bytes; v2 memory.peak,
  // or memory.current on kernels before 5.19); -1 if unknown.
  int64_t PeakBytes(const std::string& dir) const;

  // Process ids now in `dir` (cgroup.procs); empty if it cannot be read.
  std::vector<pid_t> Processes(const std::string& dir) const;
  // Process ids in the cgroups below `dir` (not in `dir` itself): a container's, whose engine
  // made its cgroups under the learner's (ContainerSpec::cgroup_parent).
  // `except`: a child cgroup left out with what is below it (the engine's own: podman's
  // "conmon", which cleans the container up once it is gone).
  std::vector<pid_t> ProcessesBelow(const std::string& dir, const std::string& except = "") const;

  // `dir` as a path of its hierarchy (what a container engine's --cgroup-parent takes), e.g.
  // "/weftd/weft-1a2b/job-x.a1.r0"; empty if `dir` is not in a mounted cgroup hierarchy.
  std::string HierarchyPath(const std::string& dir) const;

  // Starts counting the out-of-memory events of `dir` itself, however deep below it the process
  // the kernel killed was: a v1 eventfd on memory.oom_control (v1 counts oom_kill only in the
  // victim's own cgroup, which a container's engine removes with the container). Returns the
  // watch's descriptor, or -1 (v2, whose memory.events counts its descendants' kills: OomKills
  // suffices; or the kernel refused). The caller closes it.
  int WatchOom(const std::string& dir) const;
  // Whether the kernel has reported an out-of-memory event on `watch` (WatchOom's) since it was
  // made. Never blocks.
  static bool OomSeen(int watch);

  // Removes the cgroup at `dir` (rmdir), with the cgroups below it, and the same path in the
  // host's other hierarchies, where a container engine made it for the container's cpu, pids and
  // device controllers. OK if it is gone already; FailedPrecondition while a process (even a
  // zombie) is left in it.
  absl::Status Remove(const std::string& dir) const;

  // Removes every cgroup under the parent that no process is left in (left behind by an earlier
  // weftd); those in use stay. Returns how many went.
  int RemoveUnused() const;

  // The directory of `pid`'s memory cgroup if it is one of the parent's children (an earlier
  // weftd's learner); empty otherwise.
  std::string CgroupOf(pid_t pid) const;

  Version version() const { return version_; }
  const std::string& parent() const { return parent_; }
  // "cgroup v1 at <parent>" or "cgroup v2 at <parent>".
  std::string Describe() const;

 private:
  MemoryCgroups(Version version, std::string parent)
      : version_(version), parent_(std::move(parent)) {}
  Version version_;
  std::string parent_;
};

}  // namespace weft
