#include "executor/job_isolation.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"

namespace weft {

JobIsolation::JobIsolation(Options options, AttemptChannels& channels)
    : options_(std::move(options)),
      channels_(channels),
      namespaces_(options_.netns_dir),
      uids_(options_.first_uid, options_.uid_count) {}

absl::StatusOr<AttemptSetup> JobIsolation::Join(const std::string& job_id, int64_t attempt,
                                                std::optional<uid_t> adopted_uid, bool channel) {
  absl::MutexLock lock(&mu_);
  const std::string key = Key(job_id, attempt);
  if (auto it = attempts_.find(key); it != attempts_.end()) {
    ++it->second.learners;
    return it->second.setup;
  }
  Attempt a;
  absl::StatusOr<uid_t> uid = uids_.Take(job_id, adopted_uid);
  if (!uid.ok()) return uid.status();
  a.setup.uid = *uid;
  a.learners = 1;
  absl::Status s;
  if (options_.network_namespaces) {
    absl::StatusOr<std::string> ns = namespaces_.Create(key);
    if (ns.ok()) {
      a.setup.network_namespace = *ns;
    } else {
      s = ns.status();
    }
  }
  if (s.ok()) {
    a.setup.shm_dir = absl::StrCat(options_.shm_dir, "/", key);
    s = MakeDirs(options_.shm_dir);
    if (s.ok() && ::mkdir(a.setup.shm_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      s = absl::InternalError(
          absl::StrCat("cannot make ", a.setup.shm_dir, ": ", std::strerror(errno)));
    }
    if (s.ok() && ::chown(a.setup.shm_dir.c_str(), *uid, *uid) != 0 && ::geteuid() == 0) {
      s = absl::InternalError(
          absl::StrCat("cannot chown ", a.setup.shm_dir, ": ", std::strerror(errno)));
    }
  }
  if (s.ok() && channel) {
    absl::StatusOr<std::string> dir = channels_.Open(job_id, attempt);
    if (dir.ok()) {
      a.setup.channel_dir = *dir;
    } else {
      s = dir.status();
    }
  }
  if (!s.ok()) {
    RemoveLocked(key, a);
    uids_.Release(job_id);
    return s;
  }
  attempts_[key] = a;
  return a.setup;
}

void JobIsolation::RemoveLocked(const std::string& key, const Attempt& a) {
  if (!a.setup.network_namespace.empty()) {
    if (absl::Status s = namespaces_.Remove(key); !s.ok()) spdlog::warn("{}", s.message());
  }
  if (!a.setup.shm_dir.empty()) (void)RemoveAll(a.setup.shm_dir);
}

void JobIsolation::Leave(const std::string& job_id, int64_t attempt) {
  absl::MutexLock lock(&mu_);
  const std::string key = Key(job_id, attempt);
  auto it = attempts_.find(key);
  if (it == attempts_.end() || --it->second.learners > 0) return;
  RemoveLocked(key, it->second);
  if (!it->second.setup.channel_dir.empty()) channels_.Close(job_id, attempt);
  attempts_.erase(it);
  uids_.Release(job_id);
}

int JobIsolation::RemoveUnused() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> in_use;
  for (const auto& [key, a] : attempts_) in_use.push_back(key);
  int removed = options_.network_namespaces ? namespaces_.RemoveAllBut(in_use) : 0;
  removed += channels_.RemoveAllBut(in_use);
  if (DIR* d = ::opendir(options_.shm_dir.c_str())) {
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != ".." && std::find(in_use.begin(), in_use.end(), n) == in_use.end()) {
        stale.push_back(n);
      }
    }
    ::closedir(d);
    for (const std::string& n : stale) removed += RemoveAll(options_.shm_dir + "/" + n).ok();
  }
  return removed;
}

}  // namespace weft
