// What sets one job's learners apart from every other job's, and what the containers of one job
// attempt share: the job's own uid (one per job with learners running, from a range weftd
// owns), and per attempt a network namespace with only loopback (its gang's rendezvous and
// parameter servers), a shared-memory directory (/dev/shm of its containers: the GaDei parameter
// server's segment) and its channel to weftd (AttemptChannels). Made when an attempt's first
// learner starts, removed when its last one ends.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "executor/job_uids.h"
#include "executor/network_namespaces.h"

namespace weft {

// The way from a job attempt's containers to weftd's coordinator: a unix socket in a directory
// of its own, which the containers of that attempt (and no other) see at /run/weft. What comes
// through it is served for that job attempt only (control/learner_channels.h).
class AttemptChannels {
 public:
  virtual ~AttemptChannels() = default;
  // The host directory holding the attempt's `coordinator.sock` (kChannelSocket), listening
  // from now on (again, after a weftd restart, for adopted learners). Internal when the socket
  // cannot be made.
  virtual absl::StatusOr<std::string> Open(const std::string& job_id, int64_t attempt) = 0;
  // Stops listening and removes the directory; connections already made stay until they close.
  virtual void Close(const std::string& job_id, int64_t attempt) = 0;
  // Removes the directories of every attempt but `in_use` (keys "<job>.a<attempt>") that an
  // earlier weftd left. Returns how many went.
  virtual int RemoveAllBut(const std::vector<std::string>& in_use) = 0;
};

// Where a container sees its attempt's channel directory, and the socket in it.
inline constexpr char kChannelMountPoint[] = "/run/weft";
inline constexpr char kChannelSocket[] = "coordinator.sock";

// What the learners of one attempt share.
struct AttemptSetup {
  uid_t uid = 0;                  // the job's; gid the same number
  std::string network_namespace;  // pinned namespace file; "" when not made (no root)
  std::string shm_dir;            // host directory mounted at /dev/shm
  std::string channel_dir;        // AttemptChannels::Open's directory
};

class JobIsolation {
 public:
  struct Options {
    std::string netns_dir;  // where network namespaces are pinned (owner-only)
    std::string shm_dir;    // under /dev/shm: each attempt's directory goes below it
    uid_t first_uid = 1000000000;
    int uid_count = 65536;
    bool network_namespaces = true;  // false: none made (bubblewrap without root)
  };
  // `channels` is borrowed and must outlive this.
  JobIsolation(Options options, AttemptChannels& channels);
  JobIsolation(const JobIsolation&) = delete;
  JobIsolation& operator=(const JobIsolation&) = delete;

  // The setup of `job_id`'s attempt `attempt` for one more learner: made if it is the attempt's
  // first (the job's uid then taken, unless one of its learners runs already). `adopted_uid`:
  // an earlier weftd's learner that runs as that uid, kept. ResourceExhausted when every uid of
  // the range is held by a running job; Internal when the namespace, directory or channel
  // cannot be made (nothing is kept then).
  // `channel`: the attempt needs its channel to weftd (its learners are in containers; a
  // command job's supervisors reach weftd from the host).
  absl::StatusOr<AttemptSetup> Join(const std::string& job_id, int64_t attempt,
                                    std::optional<uid_t> adopted_uid = std::nullopt,
                                    bool channel = true);
  // One learner of the attempt has ended; the last one removes the attempt's setup, and the
  // job's uid is free again once no attempt of the job holds it.
  void Leave(const std::string& job_id, int64_t attempt);

  // Removes what an earlier weftd left of attempts no learner holds now: pinned namespaces and
  // shared-memory directories. Call after adopting. Returns how many went.
  int RemoveUnused();

 private:
  struct Attempt {
    AttemptSetup setup;
    int learners = 0;
  };
  static std::string Key(const std::string& job_id, int64_t attempt) {
    return job_id + ".a" + std::to_string(attempt);
  }
  void RemoveLocked(const std::string& key, const Attempt& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  AttemptChannels& channels_;
  const NetworkNamespaces namespaces_;
  JobUids uids_;  // each attempt holds its job's uid once
  absl::Mutex mu_;
  std::map<std::string, Attempt> attempts_ ABSL_GUARDED_BY(mu_);  // by Key()
};

}  // namespace weft
