#include "common/file_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/text.h"

namespace weft {

// One open directory of the walk: the path from the root down to the entry being read.
struct DiskUsageWalk::Level {
  DIR* dir = nullptr;
  std::string name;  // the root's path for the first level, else the directory's entry name
};

namespace {

constexpr int kOpenDirectory = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// A finding about an entry that could not be opened or read: gone since it was listed counts as
// nothing, anything else is reported.
bool Vanished(int error) { return error == ENOENT || error == ENOTDIR; }

}  // namespace

void DiskUsageWalk::Finding(const std::vector<Level>& path, const std::string& name,
                            const std::string& what) {
  if (findings_.size() >= DiskUsage::kMaxFindings) {
    ++more_findings_;
    return;
  }
  std::string where;
  for (const Level& l : path) absl::StrAppend(&where, where.empty() ? "" : "/", l.name);
  if (!name.empty()) absl::StrAppend(&where, where.empty() ? "" : "/", name);
  findings_.push_back(absl::StrCat(Printable(where, 160), ": ", what));
}

DiskUsage DiskUsageWalk::usage() const {
  DiskUsage u = usage_;
  u.unmeasured = findings_;
  if (more_findings_ > 0) u.unmeasured.push_back(absl::StrCat("and ", more_findings_, " more"));
  return u;
}

mode_t DiskUsageWalk::Count(int dir_fd, const char* name, const std::vector<Level>& path) {
  struct stat st {};
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (!Vanished(errno)) Finding(path, name, strerror(errno));
    return 0;
  }
  if (!seen_.insert({st.st_dev, st.st_ino}).second) return 0;
  usage_.bytes += int64_t{st.st_blocks} * 512;
  usage_.inodes += 1;
  if (usage_.inodes > limits_.max_inodes) {
    Finding(path, "",
            absl::StrCat("more than ", limits_.max_inodes, " files; the rest not walked"));
    stopped_ = true;
    return 0;
  }
  return S_ISDIR(st.st_mode) ? S_IFDIR : 0;
}

void DiskUsageWalk::Add(const std::string& root) {
  if (stopped_) return;
  const int root_fd = open(root.c_str(), kOpenDirectory);
  if (root_fd < 0) {
    if (!Vanished(errno) && errno != ELOOP) Finding({}, root, strerror(errno));
    return;
  }
  std::vector<Level> path;
  path.push_back({fdopendir(root_fd), root});
  if (path.back().dir == nullptr) {
    Finding({}, root, strerror(errno));
    close(root_fd);
    return;
  }
  if (Count(root_fd, ".", {}) == 0) {
    closedir(path.back().dir);  // counted before (or past the limit): nothing new under it
    return;
  }
  while (!path.empty()) {
    DIR* dir = path.back().dir;
    errno = 0;
    const dirent* entry = stopped_ ? nullptr : readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) Finding(path, "", strerror(errno));
      closedir(dir);
      path.pop_back();
      continue;
    }
    const char* name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (Count(dirfd(dir), name, path) != S_IFDIR) continue;
    if (static_cast<int>(path.size()) > limits_.max_depth) {
      Finding(path, name, absl::StrCat("nested deeper than ", limits_.max_depth, " directories"));
      continue;
    }
    const int fd = openat(dirfd(dir), name, kOpenDirectory);
    if (fd < 0) {
      if (!Vanished(errno)) Finding(path, name, strerror(errno));
      continue;
    }
    DIR* child = fdopendir(fd);
    if (child == nullptr) {
      Finding(path, name, strerror(errno));
      close(fd);
      continue;
    }
    path.push_back({child, name});
  }
}

namespace {

constexpr int kMaxOpenLevels = 64;  // RemoveTree's directories open at once

struct Removal {
  int root_fd = -1;
  int64_t moved_up = 0;  // subtrees moved up to the root so far (their new names)
  std::string error;     // the first
  void Fail(const std::string& where, int error_number) {
    if (error.empty()) error = absl::StrCat(Printable(where, 160), ": ", strerror(error_number));
  }
};

// Removes everything inside the open directory `fd` (which this closes); `where` names it in
// errors. `depth`: directories open above it.
void RemoveInside(int fd, const std::string& where, int depth, Removal* r);

// Removes the entry `name` of the open directory `parent_fd`.
void RemoveEntry(int parent_fd, const char* name, const std::string& where, int depth, Removal* r) {
  if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) return r->Fail(where + "/" + name, errno);
  if (depth >= kMaxOpenLevels) {
    // Too deep to descend with a descriptor per level: moved up beside the others at the root,
    // where a later pass removes it. Names starting with ".weft-deep-" are the walk's own.
    for (int tries = 0; tries < 100; ++tries) {
      const std::string up = absl::StrCat(".weft-deep-", r->moved_up++);
      if (renameat2(parent_fd, name, r->root_fd, up.c_str(), RENAME_NOREPLACE) == 0) return;
      if (errno != EEXIST) break;
    }
    return r->Fail(where + "/" + name, errno);
  }
  const int fd = openat(parent_fd, name, kOpenDirectory);
  if (fd < 0) {
    if (errno != ENOENT) r->Fail(where + "/" + name, errno);
    return;
  }
  RemoveInside(fd, where + "/" + name, depth + 1, r);
  if (unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
    r->Fail(where + "/" + name, errno);
  }
}

void RemoveInside(int fd, const std::string& where, int depth, Removal* r) {
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    r->Fail(where, errno);
    close(fd);
    return;
  }
  // Names first, then removal: unlinking while readdir goes on may skip entries.
  std::vector<std::string> names;
  errno = 0;
  for (const dirent* e = readdir(dir); e != nullptr; e = readdir(dir)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  if (errno != 0) r->Fail(where, errno);
  for (const std::string& name : names) RemoveEntry(dirfd(dir), name.c_str(), where, depth, r);
  closedir(dir);
}

}  // namespace

absl::Status RemoveTree(const std::string& path) {
  if (unlink(path.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();  // a file or link
  Removal r;
  r.root_fd = open(path.c_str(), kOpenDirectory);
  if (r.root_fd < 0) return absl::InternalError(absl::StrCat(path, ": ", strerror(errno)));
  // Each pass removes what it can reach and moves deeper subtrees up to the root; a pass that
  // moved nothing up has removed everything it could.
  for (int64_t before = -1; before != r.moved_up && r.error.empty();) {
    before = r.moved_up;
    const int fd = dup(r.root_fd);
    if (fd < 0) {
      r.Fail(path, errno);
      break;
    }
    lseek(fd, 0, SEEK_SET);
    RemoveInside(fd, path, 0, &r);
  }
  close(r.root_fd);
  if (rmdir(path.c_str()) != 0 && errno != ENOENT) r.Fail(path, errno);
  if (!r.error.empty()) return absl::InternalError(absl::StrCat("cannot remove ", r.error));
  return absl::OkStatus();
}

}  // namespace weft
