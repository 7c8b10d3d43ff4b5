#include "control/learner_channels.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/logging.h"

namespace weft {

LearnerChannels::LearnerChannels(std::string dir) : dir_(std::move(dir)) {
  if (absl::Status s = MakeDirs(dir_); !s.ok()) spdlog::warn("{}", s.message());
  ::chmod(dir_.c_str(), 0700);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::error("learner channels: pipe: {}", std::strerror(errno));
  }
  thread_ = std::thread([this] { AcceptLoop(); });
}

LearnerChannels::~LearnerChannels() {
  std::vector<std::pair<std::string, Listener>> open;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    server_ = nullptr;
    open.assign(listeners_.begin(), listeners_.end());
    listeners_.clear();
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  for (auto& [key, l] : open) {
    ::close(l.fd);
    (void)RemoveAll(l.dir);
  }
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void LearnerChannels::Wake() {
  const char byte = 1;
  (void)!::write(wake_[1], &byte, 1);
}

void LearnerChannels::Serve(grpc::Server* server) {
  {
    absl::MutexLock lock(&mu_);
    server_ = server;
  }
  Wake();
}

absl::StatusOr<std::string> LearnerChannels::Open(const std::string& job_id, int64_t attempt) {
  const std::string key = Key(job_id, attempt);
  const std::string dir = absl::StrCat(dir_, "/", key);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = listeners_.find(key); it != listeners_.end()) return it->second.dir;
  }
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot make ", dir, ": ", std::strerror(errno)));
  }
  ::chmod(dir.c_str(), 0711);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", dir, ": ", std::strerror(errno)));
  }
  // Bound through the directory's descriptor: a unix socket's path is at most 107 bytes, and
  // weftd's data directory may be deep. (The name is looked up when a learner connects, so the
  // socket is reachable at its full path all the same.)
  ::unlinkat(dir_fd, kChannelSocket, 0);  // an earlier weftd's
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string short_path = absl::StrCat("/proc/self/fd/", dir_fd, "/", kChannelSocket);
  std::memcpy(addr.sun_path, short_path.c_str(), short_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  absl::Status s;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::fchmodat(dir_fd, kChannelSocket, 0666, 0) != 0 || ::listen(fd, 64) != 0) {
    s = absl::InternalError(
        absl::StrCat("cannot listen on ", dir, "/", kChannelSocket, ": ", std::strerror(errno)));
  }
  ::close(dir_fd);
  if (!s.ok()) {
    if (fd >= 0) ::close(fd);
    return s;
  }
  {
    absl::MutexLock lock(&mu_);
    listeners_[key] = {fd, dir};
  }
  Wake();
  return dir;
}

void LearnerChannels::Close(const std::string& job_id, int64_t attempt) {
  Listener l;
  {
    absl::MutexLock lock(&mu_);
    auto it = listeners_.find(Key(job_id, attempt));
    if (it == listeners_.end()) return;
    l = it->second;
    listeners_.erase(it);
  }
  Wake();
  // A poll in flight may still hold l.fd (or, once closed, its number reused): the loop accepts
  // only on a descriptor that is still the listener of the key it polled it for.
  ::close(l.fd);
  (void)RemoveAll(l.dir);
}

int LearnerChannels::RemoveAllBut(const std::vector<std::string>& in_use) {
  std::vector<std::string> stale;
  std::error_code ec;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string key = e.path().filename().string();
      if (listeners_.count(key) == 0 &&
          std::find(in_use.begin(), in_use.end(), key) == in_use.end()) {
        stale.push_back(e.path().string());
      }
    }
  }
  int removed = 0;
  for (const std::string& dir : stale) removed += RemoveAll(dir).ok();
  return removed;
}

bool LearnerChannels::Allows(const std::string& peer, const std::string& job_id,
                             int64_t attempt) const {
  if (peer.rfind("fd:", 0) != 0) return true;
  int fd = -1;
  if (!absl::SimpleAtoi(peer.substr(3), &fd)) return false;
  absl::MutexLock lock(&mu_);
  auto it = connections_.find(fd);
  return it != connections_.end() && it->second == Key(job_id, attempt);
}

void LearnerChannels::AcceptLoop() {
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}};
    std::vector<std::string> keys = {""};
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (server_ != nullptr) {
        for (const auto& [key, l] : listeners_) {
          fds.push_back({l.fd, POLLIN, 0});
          keys.push_back(key);
        }
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      spdlog::error("learner channels: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (::read(wake_[0], buf, sizeof buf) > 0) {
      }
      continue;  // the listeners changed: poll the new set
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      absl::MutexLock lock(&mu_);
      // Still open (Close may have come meanwhile), and a server to hand connections to.
      auto it = listeners_.find(keys[i]);
      if (server_ == nullptr || it == listeners_.end() || it->second.fd != fds[i].fd) continue;
      for (;;) {
        const int conn = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) break;
        connections_[conn] = keys[i];
        // gRPC owns the descriptor from here on and names the connection's peer "fd:<conn>".
        grpc::AddInsecureChannelFromFd(server_, conn);
      }
    }
  }
}

}  // namespace weft
