#include "executor/process_tree.h"

#include <dirent.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace weft {
namespace {

// The value of "<field>: N kB" in `text`, in bytes, or -1.
int64_t KibField(const std::string& text, const std::string& field) {
  size_t at = text.find("\n" + field + ":");
  if (at == std::string::npos) return -1;
  int64_t kib = -1;
  if (sscanf(text.c_str() + at + field.size() + 2, " %" SCNd64 " kB", &kib) != 1) return -1;
  return kib * 1024;
}

}  // namespace

bool ProcessAlive(pid_t pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  char state = (*stat)[paren + 2];
  return state != 'Z' && state != 'X';
}

int64_t ResidentAnonymousBytes(pid_t pid, bool proportional) {
  if (proportional) {
    auto rollup = ReadFile(absl::StrCat("/proc/", pid, "/smaps_rollup"));
    const int64_t pss = rollup.ok() ? KibField("\n" + *rollup, "Pss_Anon") : -1;
    if (pss >= 0) return pss;
  }
  auto status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
  return status.ok() ? KibField(*status, "RssAnon") : -1;
}

std::multimap<pid_t, pid_t> ChildrenByParent() {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* d = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(d->d_name, &pid)) continue;
    auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    if (!stat.ok()) continue;  // gone meanwhile
    // "pid (comm) state ppid …"; comm may hold spaces and parentheses, so read after the last ')'.
    size_t paren = stat->rfind(')');
    char state = 0;
    int ppid = 0;
    if (paren != std::string::npos &&
        sscanf(stat->c_str() + paren + 1, " %c %d", &state, &ppid) == 2) {
      children.emplace(ppid, pid);
    }
  }
  closedir(proc);
  return children;
}

std::vector<pid_t> ProcessTree(pid_t root, const std::multimap<pid_t, pid_t>& children) {
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size() && tree.size() < 100000; ++i) {
    auto [from, to] = children.equal_range(tree[i]);
    for (auto it = from; it != to; ++it) tree.push_back(it->second);
  }
  return tree;
}

}  // namespace weft
