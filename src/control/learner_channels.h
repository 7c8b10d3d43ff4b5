// The coordinator's doors for learners in containers: one unix socket per job attempt, in a
// directory of its own that only that attempt's containers see (at /run/weft; the network of a
// container has no way to weftd's TCP ports). Each connection accepted on an attempt's socket is
// handed to the coordinator's gRPC server (grpc::AddInsecureChannelFromFd) and remembered with
// its attempt, so the coordinator acts on calls through it only for that job attempt (Allows),
// whatever credential they carry. Plain text: the socket never leaves the host.
//
// Thread-safety: all methods may be called from any thread; one thread of its own accepts.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "executor/job_isolation.h"

namespace weft {

class LearnerChannels : public AttemptChannels {
 public:
  // Sockets live under `dir` (<data-dir>/run/channels, made 0700; what an earlier weftd left
  // there is reused by Open for the attempts it adopts).
  explicit LearnerChannels(std::string dir);
  ~LearnerChannels() override;  // stops accepting and removes the sockets
  LearnerChannels(const LearnerChannels&) = delete;
  LearnerChannels& operator=(const LearnerChannels&) = delete;

  // Where accepted connections go. Until it is set, connections wait in the sockets' backlog.
  // `server` must outlive this, or Serve(nullptr) must come before it goes.
  void Serve(grpc::Server* server);

  // The attempt's directory, holding kChannelSocket (0666 in a 0711 directory: whoever is given
  // the directory may connect; nobody on the host reaches <data-dir>/run). Internal if the
  // socket cannot be bound.
  absl::StatusOr<std::string> Open(const std::string& job_id, int64_t attempt) override;
  void Close(const std::string& job_id, int64_t attempt) override;
  int RemoveAllBut(const std::vector<std::string>& in_use) override;

  // Whether a call from `peer` (grpc::ServerContext::peer()) may act for job `job_id`'s attempt
  // `attempt`: a connection through an attempt's socket ("fd:N") only for that attempt; a peer
  // of the TCP port (a command job's supervisor, a Slurm learner) as its credential says.
  bool Allows(const std::string& peer, const std::string& job_id, int64_t attempt) const;

 private:
  struct Listener {
    int fd = -1;
    std::string dir;
  };
  static std::string Key(const std::string& job_id, int64_t attempt) {
    return job_id + ".a" + std::to_string(attempt);
  }
  void AcceptLoop();
  void Wake();

  const std::string dir_;
  int wake_[2] = {-1, -1};  // a pipe: a byte wakes the accept loop to re-read listeners_
  mutable absl::Mutex mu_;
  grpc::Server* server_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Listener> listeners_ ABSL_GUARDED_BY(mu_);  // by Key()
  std::map<int, std::string> connections_ ABSL_GUARDED_BY(mu_);     // accepted fd -> Key()
  std::thread thread_;
};

}  // namespace weft
