#include "executor/memory_cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace weft {
namespace {

// Writes `value` to the control file `path` in one write(2), as the kernel wants.
absl::Status WriteControl(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return absl::InternalError(
        absl::StrCat("cannot write '", value, "' to ", path, ": ", strerror(n < 0 ? err : EIO)));
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
}

// The number after `key` on its own line of `text` ("oom_kill 3"), or -1.
int64_t KeyedValue(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t v = 0;
    if (kv.size() == 2 && kv[0] == key && absl::SimpleAtoi(kv[1], &v)) return v;
  }
  return -1;
}

int64_t FileNumber(const std::string& path) {
  auto text = ReadFile(path);
  int64_t v = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) return -1;
  return v;
}

bool HasWord(absl::string_view list, absl::string_view word, char sep) {
  for (absl::string_view w : absl::StrSplit(list, sep, absl::SkipEmpty())) {
    if (absl::StripAsciiWhitespace(w) == word) return true;
  }
  return false;
}

// This process's cgroup path in the v1 hierarchy that has the memory controller
// (`v1 == true`) or in the v2 hierarchy, from /proc/self/cgroup; empty if none.
std::string OwnCgroup(bool v1) {
  auto text = ReadFile("/proc/self/cgroup");
  if (!text.ok()) return "";
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (v1 ? HasWord(f[1], "memory", ',') : (f[0] == "0" && f[1].empty())) return std::string(f[2]);
  }
  return "";
}

struct Mount {
  std::string root;         // the hierarchy's directory mounted there
  std::string mount_point;  // where
};

// The mount of the v1 hierarchy with the memory controller (`v1 == true`) or of cgroup2.
bool FindMount(bool v1, Mount* m) {
  auto text = ReadFile("/proc/self/mountinfo");
  if (!text.ok()) return false;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // "id parent maj:min root mount-point options [optional…] - fstype source super-options"
    std::vector<absl::string_view> halves = absl::StrSplit(line, absl::MaxSplits(" - ", 1));
    if (halves.size() != 2) continue;
    std::vector<absl::string_view> left = absl::StrSplit(halves[0], ' ');
    std::vector<absl::string_view> right = absl::StrSplit(halves[1], ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    bool match =
        v1 ? right[0] == "cgroup" && HasWord(right[2], "memory", ',') : right[0] == "cgroup2";
    if (!match) continue;
    m->root = std::string(left[3]);
    m->mount_point = std::string(left[4]);
    return true;
  }
  return false;
}

// Every mounted cgroup hierarchy (v1 and v2).
std::vector<Mount> CgroupMounts() {
  std::vector<Mount> mounts;
  auto text = ReadFile("/proc/self/mountinfo");
  if (!text.ok()) return mounts;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> halves = absl::StrSplit(line, absl::MaxSplits(" - ", 1));
    if (halves.size() != 2) continue;
    std::vector<absl::string_view> left = absl::StrSplit(halves[0], ' ');
    std::vector<absl::string_view> right = absl::StrSplit(halves[1], ' ');
    if (left.size() < 5 || right.empty()) continue;
    if (right[0] == "cgroup" || right[0] == "cgroup2") {
      mounts.push_back({std::string(left[3]), std::string(left[4])});
    }
  }
  return mounts;
}

// The subdirectories of `dir`, deepest first (each before its parent).
void SubdirectoriesDeepestFirst(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> children;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const std::string& c : children) {
    SubdirectoriesDeepestFirst(c, out);
    out->push_back(c);
  }
}

// Removes `dir` and every cgroup below it; the errno of the first rmdir that failed, else 0.
int RemoveCgroupTree(const std::string& dir) {
  std::vector<std::string> dirs;
  SubdirectoriesDeepestFirst(dir, &dirs);
  dirs.push_back(dir);
  int err = 0;
  for (const std::string& d : dirs) {
    if (::rmdir(d.c_str()) != 0 && errno != ENOENT && err == 0) err = errno;
  }
  return err;
}

// Where the hierarchy path `cgroup` is in the filesystem under `m`.
std::string PathOf(const Mount& m, const std::string& cgroup) {
  absl::string_view rel = cgroup;
  if (m.root != "/") absl::ConsumePrefix(&rel, m.root);
  std::string path = absl::StrCat(m.mount_point, rel);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MemoryCgroups>> MemoryCgroups::ForThisProcess(
    const std::string& tag) {
  const std::string parent_name = absl::StrCat("weft-", tag);
  Mount m;
  // A hybrid host binds the memory controller to v1 or to v2, never both: look for v1 first.
  if (FindMount(/*v1=*/true, &m)) {
    std::string base = PathOf(m, OwnCgroup(/*v1=*/true));
    if (::access(base.c_str(), W_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the memory cgroup (v1) ", base, " is not writable by weftd: ", strerror(errno)));
    }
    return Open(Version::kV1, absl::StrCat(base, "/", parent_name));
  }
  if (!FindMount(/*v1=*/false, &m)) {
    return absl::FailedPreconditionError("no cgroup v1 memory controller or cgroup v2 mounted");
  }
  std::string base = PathOf(m, OwnCgroup(/*v1=*/false));
  auto controllers = ReadFile(base + "/cgroup.controllers");
  if (!controllers.ok() || !HasWord(*controllers, "memory", ' ')) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup v2: weftd's cgroup ", base, " is not given the memory controller"));
  }
  if (::access(base.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup v2: weftd's cgroup ", base, " is not writable: ", strerror(errno)));
  }
  auto subtree = ReadFile(base + "/cgroup.subtree_control");
  if (!subtree.ok() || !HasWord(*subtree, "memory", ' ')) {
    // A cgroup with processes cannot hand controllers to its children: weftd moves itself into
    // a leaf beside its learners first (what systemd's Delegate=yes expects of a service).
    const std::string leaf = base + "/weftd";
    if (auto s = MakeDir(leaf); !s.ok()) return absl::FailedPreconditionError(s.message());
    if (auto s = WriteControl(leaf + "/cgroup.procs", absl::StrCat(::getpid())); !s.ok()) {
      return absl::FailedPreconditionError(s.message());
    }
    if (auto s = WriteControl(base + "/cgroup.subtree_control", "+memory"); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(s.message(),
                       " (weftd's cgroup holds other processes: run weftd in a "
                       "cgroup of its own, e.g. systemd's Delegate=yes)"));
    }
  }
  return Open(Version::kV2, absl::StrCat(base, "/", parent_name));
}

absl::StatusOr<std::unique_ptr<MemoryCgroups>> MemoryCgroups::Open(Version version,
                                                                   std::string parent) {
  if (auto s = MakeDir(parent); !s.ok()) return s;
  if (version == Version::kV2) {
    if (auto s = WriteControl(parent + "/cgroup.subtree_control", "+memory"); !s.ok()) return s;
  }
  return std::unique_ptr<MemoryCgroups>(new MemoryCgroups(version, std::move(parent)));
}

absl::StatusOr<std::string> MemoryCgroups::Create(const std::string& name,
                                                  int64_t limit_bytes) const {
  if (name.empty() || name[0] == '.' || absl::StrContains(name, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("bad cgroup name '", name, "'"));
  }
  const std::string dir = absl::StrCat(parent_, "/", name);
  if (auto s = MakeDir(dir); !s.ok()) return s;
  const std::string limit =
      limit_bytes > 0 ? absl::StrCat(limit_bytes) : (version_ == Version::kV1 ? "-1" : "max");
  if (version_ == Version::kV1) {
    // memory+swap may never be below memory alone: raise it first when a reused cgroup grows,
    // set memory, then memory+swap to the same (where swap is accounted at all).
    const std::string memsw = dir + "/memory.memsw.limit_in_bytes";
    const bool swap_accounted = ::access(memsw.c_str(), F_OK) == 0;
    if (swap_accounted) (void)WriteControl(memsw, limit);
    if (auto s = WriteControl(dir + "/memory.limit_in_bytes", limit); !s.ok()) return s;
    if (swap_accounted) {
      if (auto s = WriteControl(memsw, limit); !s.ok()) return s;
    }
    return dir;
  }
  if (auto s = WriteControl(dir + "/memory.max", limit); !s.ok()) return s;
  // Both are absent on some kernels (no swap accounting; before 4.19): the limit holds anyway.
  (void)WriteControl(dir + "/memory.swap.max", "0");
  (void)WriteControl(dir + "/memory.oom.group", "1");
  return dir;
}

absl::Status MemoryCgroups::Join(const std::string& dir, pid_t pid) const {
  return WriteControl(dir + "/cgroup.procs", absl::StrCat(pid));
}

int64_t MemoryCgroups::OomKills(const std::string& dir) const {
  auto text = ReadFile(dir + (version_ == Version::kV1 ? "/memory.oom_control" : "/memory.events"));
  if (!text.ok()) return 0;
  return std::max<int64_t>(KeyedValue(*text, "oom_kill"), 0);
}

int64_t MemoryCgroups::PeakBytes(const std::string& dir) const {
  if (version_ == Version::kV1) return FileNumber(dir + "/memory.max_usage_in_bytes");
  int64_t peak = FileNumber(dir + "/memory.peak");
  return peak >= 0 ? peak : FileNumber(dir + "/memory.current");
}

std::vector<pid_t> MemoryCgroups::Processes(const std::string& dir) const {
  std::vector<pid_t> pids;
  auto text = ReadFile(dir + "/cgroup.procs");
  if (!text.ok()) return pids;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

std::vector<pid_t> MemoryCgroups::ProcessesBelow(const std::string& dir,
                                                 const std::string& except) const {
  std::vector<std::string> dirs;
  SubdirectoriesDeepestFirst(dir, &dirs);
  std::vector<pid_t> pids;
  const std::string skip = except.empty() ? "" : dir + "/" + except;
  for (const std::string& d : dirs) {
    if (!skip.empty() && (d == skip || absl::StartsWith(d, skip + "/"))) continue;
    std::vector<pid_t> here = Processes(d);
    pids.insert(pids.end(), here.begin(), here.end());
  }
  return pids;
}

std::string MemoryCgroups::HierarchyPath(const std::string& dir) const {
  const Mount* best = nullptr;
  std::vector<Mount> mounts = CgroupMounts();
  for (const Mount& m : mounts) {
    if ((dir == m.mount_point || absl::StartsWith(dir, m.mount_point + "/")) &&
        (best == nullptr || m.mount_point.size() > best->mount_point.size())) {
      best = &m;
    }
  }
  if (best == nullptr) return "";
  std::string rel = dir.substr(best->mount_point.size());
  if (best->root != "/") rel = best->root + rel;
  return rel.empty() ? "/" : rel;
}

int MemoryCgroups::WatchOom(const std::string& dir) const {
  if (version_ != Version::kV1) return -1;
  const int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  const int ofd = ::open((dir + "/memory.oom_control").c_str(), O_RDONLY | O_CLOEXEC);
  absl::Status s = efd >= 0 && ofd >= 0
                       ? WriteControl(dir + "/cgroup.event_control", absl::StrCat(efd, " ", ofd))
                       : absl::InternalError("eventfd or memory.oom_control");
  if (ofd >= 0) ::close(ofd);  // the kernel holds its own reference once registered
  if (!s.ok()) {
    if (efd >= 0) ::close(efd);
    return -1;
  }
  return efd;
}

bool MemoryCgroups::OomSeen(int watch) {
  if (watch < 0) return false;
  uint64_t events = 0;
  return ::read(watch, &events, sizeof events) == sizeof events && events > 0;
}

absl::Status MemoryCgroups::Remove(const std::string& dir) const {
  const std::string rel = HierarchyPath(dir);
  const int err = RemoveCgroupTree(dir);
  if (err == EBUSY || err == ENOTEMPTY) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " still holds a process"));
  }
  if (err != 0)
    return absl::InternalError(absl::StrCat("cannot remove ", dir, ": ", strerror(err)));
  // What a container engine made for the same learner in the other hierarchies.
  if (!rel.empty() && rel != "/") {
    for (const Mount& m : CgroupMounts()) {
      if (m.root != "/" && !absl::StartsWith(rel, m.root + "/")) continue;
      const std::string there = PathOf(m, rel);
      if (there != dir) (void)RemoveCgroupTree(there);
    }
  }
  return absl::OkStatus();
}

int MemoryCgroups::RemoveUnused() const {
  int removed = 0;
  DIR* d = ::opendir(parent_.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> dirs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    dirs.push_back(absl::StrCat(parent_, "/", e->d_name));
  }
  ::closedir(d);
  for (const std::string& dir : dirs) removed += Remove(dir).ok();
  return removed;
}

std::string MemoryCgroups::CgroupOf(pid_t pid) const {
  auto text = ReadFile(absl::StrCat("/proc/", pid, "/cgroup"));
  if (!text.ok()) return "";
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    bool ours =
        version_ == Version::kV1 ? HasWord(f[1], "memory", ',') : (f[0] == "0" && f[1].empty());
    if (!ours) continue;
    // ".../weft-<tag>/<name>": the learner's cgroup is ours if its parent has our parent's name.
    absl::string_view path = f[2];
    size_t slash = path.rfind('/');
    if (slash == absl::string_view::npos || slash == 0) return "";
    absl::string_view name = path.substr(slash + 1);
    absl::string_view above = path.substr(0, slash);
    above = above.substr(above.rfind('/') + 1);
    const absl::string_view parent_name = absl::string_view(parent_).substr(parent_.rfind('/') + 1);
    if (name.empty() || name[0] == '.' || above != parent_name) return "";
    std::string dir = absl::StrCat(parent_, "/", name);
    struct stat st;
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? dir : "";
  }
  return "";
}

std::string MemoryCgroups::Describe() const {
  return absl::StrCat("cgroup ", version_ == Version::kV1 ? "v1" : "v2", " at ", parent_);
}

}  // namespace weft
