// Directory trees a tenant's programs wrote, walked so that nothing in them can hide or stay: the
// walks go from directory descriptor to directory descriptor (openat/fstatat/unlinkat), so no path
// grows past PATH_MAX however deep a tree is nested, and symbolic links are never followed.
//
// DiskUsageWalk: what a tree takes on disk. The walk goes
// from directory descriptor to directory descriptor (openat/fstatat), so no path grows past
// PATH_MAX however deep a tree is nested; symbolic links are never followed; each inode counts
// once however many links it has, in the bytes of the blocks it holds (st_blocks × 512, what du
// reports); and what cannot be walked — an unreadable directory, a tree nested past `max_depth`,
// more than `max_inodes` entries — is a finding, not zero (issue 42: a tenant's program nesting
// 20 directories of 250-character names hid what it wrote from the old path-based walk).
//
// Entries that vanish while the walk runs count as nothing: a running job prunes its checkpoints.
//
// Thread-compatible: one DiskUsageWalk per measurement; RemoveTree is thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace weft {

struct DiskUsage {
  int64_t bytes = 0;   // st_blocks × 512 of each inode counted
  int64_t inodes = 0;  // files, directories and links counted, each once
  // What could not be measured, e.g. "/data/jobs/x/work/a: Permission denied" (at most
  // kMaxFindings, then "and N more"); empty when every entry under every root was counted.
  std::vector<std::string> unmeasured;
  static constexpr size_t kMaxFindings = 4;
};

class DiskUsageWalk {
 public:
  struct Limits {
    int max_depth = 128;  // directories below a root; deeper is a finding (one fd per level)
    int64_t max_inodes = 1'000'000;  // the walk stops past this many, with a finding
  };
  explicit DiskUsageWalk(Limits limits) : limits_(limits) {}
  DiskUsageWalk() : DiskUsageWalk(Limits{}) {}

  // Adds the directory `root` (an absolute path weft derived, not a tenant's) and everything
  // under it, each inode not counted before by this walk. A root that does not exist, or is not a
  // directory, adds nothing.
  void Add(const std::string& root);

  DiskUsage usage() const;

 private:
  struct Level;
  // Counts the entry `name` of the open directory `dir_fd`; returns its kind (S_IFMT bits) when
  // it is a directory not counted before, else 0.
  mode_t Count(int dir_fd, const char* name, const std::vector<Level>& path);
  void Finding(const std::vector<Level>& path, const std::string& name, const std::string& what);

  const Limits limits_;
  std::set<std::pair<dev_t, ino_t>> seen_;
  DiskUsage usage_;  // bytes and inodes
  std::vector<std::string> findings_;
  int64_t more_findings_ = 0;
  bool stopped_ = false;  // past max_inodes
};

// Removes `path` and everything under it, never following a symbolic link, however deeply the
// tree is nested: a subtree deeper than the walk keeps directories open for is first moved up to
// `path` itself (renameat), then removed from there. OK when `path` does not exist; the first
// error otherwise (Internal, naming the entry and errno's text), after removing all it could.
absl::Status RemoveTree(const std::string& path);

}  // namespace weft
