// What /proc says about a learner's processes: whether one lives, its children, and the memory
// they hold. The local executor's watchdog (for learners outside a memory cgroup) and its
// adoption of an earlier weftd's learners read them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

namespace weft {

// Alive and not a zombie, per /proc/<pid>/stat.
bool ProcessAlive(pid_t pid);

// Resident anonymous memory of `pid` in bytes, or -1 if it cannot be read. Alone, its RssAnon
// (/proc/<pid>/status, cheap). In a tree of processes (`proportional`), its share of anonymous
// pages (Pss_Anon, /proc/<pid>/smaps_rollup), so pages a fork shares with its parent (a data
// loader's workers) count once across the tree, not once per process.
int64_t ResidentAnonymousBytes(pid_t pid, bool proportional);

// Every process's children, from the parent pid in each /proc/<pid>/stat: one pass over /proc.
std::multimap<pid_t, pid_t> ChildrenByParent();

// `root` and every process descended from it, by `children`, root first.
std::vector<pid_t> ProcessTree(pid_t root, const std::multimap<pid_t, pid_t>& children);

}  // namespace weft
