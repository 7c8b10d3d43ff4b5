// Network namespaces for gangs: one per job attempt, with only a loopback device, pinned at a
// file of weft's own (a bind mount of the namespace, as `ip netns add` does) so that every
// container of the attempt joins it (podman --network ns:PATH, or setns before bubblewrap). The
// learners of a gang on one host then reach each other's rendezvous on 127.0.0.1, and nothing
// of the host: not weftd's ports, not the host's other services, not its abstract sockets.
//
// Needs root (mount(2) and a new network namespace). Thread-safety: Create and Remove touch only
// the file of the namespace they are given.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weft {

class NetworkNamespaces {
 public:
  // Namespaces are pinned under `dir` (made 0700 if missing).
  explicit NetworkNamespaces(std::string dir) : dir_(std::move(dir)) {}

  // The namespace `name` ([A-Za-z0-9_.-]): made now with loopback up, or the one an earlier
  // weftd pinned (its learners still in it). Returns its path. InvalidArgument for a bad name;
  // Internal with the system's reason when it cannot be made or pinned (not root).
  absl::StatusOr<std::string> Create(const std::string& name) const;

  // Unpins `name` (the namespace goes once no process is left in it). OK if it is not there.
  absl::Status Remove(const std::string& name) const;

  // Unpins every namespace under the directory that no process of `in_use` (names) needs: those
  // an earlier weftd left. Returns how many went.
  int RemoveAllBut(const std::vector<std::string>& in_use) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

}  // namespace weft
