// ExitWatcher (executor/exit_watcher.h): pidfds polled by one thread.
#include "executor/exit_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/logging.h"

namespace weft {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

ExitWatcher::ExitWatcher() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) {
    spdlog::warn("exit watcher: no eventfd ({}): learners' exits are seen at the next poll", errno);
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

ExitWatcher::~ExitWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  absl::MutexLock lock(&mu_);
  for (int fd : added_) ::close(fd);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ExitWatcher::SetListener(std::function<void()> listener) {
  absl::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

bool ExitWatcher::Watch(pid_t pid) {
  if (!thread_.joinable() || pid <= 0) return false;
  const int fd = PidfdOpen(pid);
  if (fd < 0) return false;
  {
    absl::MutexLock lock(&mu_);
    added_.push_back(fd);
    ++watched_;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  return true;
}

int ExitWatcher::Watched() const {
  absl::MutexLock lock(&mu_);
  return watched_;
}

void ExitWatcher::Run() {
  std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
  while (true) {
    for (pollfd& p : fds) p.revents = 0;
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      spdlog::warn("exit watcher: poll failed ({}): learners' exits are seen at the next poll",
                   errno);
      break;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t n = 0;
      (void)!::read(wake_fd_, &n, sizeof n);
      absl::MutexLock lock(&mu_);
      if (stop_) break;
      for (int fd : added_) fds.push_back({fd, POLLIN, 0});
      added_.clear();
    }
    int ended = 0;
    for (size_t i = 1; i < fds.size();) {
      if (fds[i].revents == 0) {
        ++i;
        continue;
      }
      ::close(fds[i].fd);  // readable (ended) or an error: either way nothing more to hear
      fds[i] = fds.back();
      fds.pop_back();
      ++ended;
    }
    if (ended == 0) continue;
    {
      absl::MutexLock lock(&mu_);
      watched_ -= ended;
    }
    absl::MutexLock lock(&listener_mu_);
    if (listener_) listener_();
  }
  for (size_t i = 1; i < fds.size(); ++i) ::close(fds[i].fd);
  absl::MutexLock lock(&mu_);
  watched_ = 0;
}

}  // namespace weft
