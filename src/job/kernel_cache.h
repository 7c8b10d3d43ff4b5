// The kernel choices of a tenant's learners (issue 19): ChooseKernels (train/models.h) times
// both kernels of a layer shape once, and a restarted attempt, an elastic job's newcomer, every
// other rank and every later job of the same tenant take that choice instead of timing again
// (0.7-5.6 s per learner for the CNN at batch 32-256 on 2026-12-07's machine, and noisier on
// cores other learners keep busy: two ranks timing on contended cores could choose differently).
//
// A job's learners read and write LOG_DIR/kernels.tsv (job/layout.h KernelCachePath), one line
// per shape: "<key>\t<onednn|blas>\n". The key names all a timing depends on: the CPU, the BLAS
// with its build and threads, the batch and the layer's shape (ChooseKernels makes it). weftd
// seeds a new job's file from its tenant's (JobLayout::TenantKernelCachePath) and merges the
// job's back into the tenant's when an attempt ends (control/kernel_choices.h); no tenant's
// choices reach another's jobs, as the keys name the shapes its models train. The job's own
// processes can write its file, so every file is read as untrusted: opened without following a
// symbolic link, a regular file only, at most kMaxKernelCacheBytes read; a line without a tab,
// with a control character, longer than kMaxKernelCacheKeyBytes or naming another kernel is
// skipped, and at most kMaxKernelCacheEntries are kept. Save writes a temporary file and renames
// it over the old one (mode 0600), so learners saving at once never tear it: the last one wins,
// and every entry any of them wrote is a valid choice.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace weft {

// 256 lines of the longest key fit in the bytes read back.
inline constexpr size_t kMaxKernelCacheBytes = 256 * 1024;
inline constexpr size_t kMaxKernelCacheEntries = 256;
inline constexpr size_t kMaxKernelCacheKeyBytes = 1000;

class KernelCache {
 public:
  // The choices in `path`; a missing or unreadable file gives an empty cache.
  static KernelCache Load(const std::string& path);

  // "onednn" or "blas" for `key`, if cached.
  std::optional<std::string> Find(const std::string& key) const;
  // Records `kernel` ("onednn" or "blas") for `key`; ignored (false) for another kernel name, a
  // key that could not be read back (control characters, a tab, over kMaxKernelCacheKeyBytes) or
  // a cache already holding kMaxKernelCacheEntries.
  bool Put(const std::string& key, const std::string& kernel);
  // Put of each of `other`'s choices (theirs win); how many were taken.
  size_t PutAll(const KernelCache& other);
  // Writes the cache to its path if Put changed it, merged with what the file holds now (another
  // rank may have saved meanwhile; this cache's entries win). Errors: those of WriteFileAtomic
  // (common/env.h), e.g. PermissionDenied, ResourceExhausted on a full disk.
  absl::Status Save() const;

  size_t size() const { return entries_.size(); }
  const std::string& path() const { return path_; }

 private:
  explicit KernelCache(std::string path) : path_(std::move(path)) {}

  std::string path_;
  std::map<std::string, std::string> entries_;
  std::map<std::string, std::string> added_;  // Put since Load
};

// This host's CPU as the first "model name" of /proc/cpuinfo names it, else "unknown cpu".
std::string CpuModel();

}  // namespace weft
