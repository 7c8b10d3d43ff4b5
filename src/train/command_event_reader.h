// Privilege separation for a command job's supervisor (as OpenSSH separates its privileged
// monitor from the process that parses the network): weft-learner runs as root, to start and stop
// the program's container, but what the program writes is read, parsed and opened by another
// process — weft-event-reader, of the job's own uid, without new privileges — so that a flaw in
// the parsing is a flaw in a process with no more rights than the program itself. Root receives
// fixed-size records it checks field by field, and for an announced checkpoint or model the
// descriptor the reader opened (SCM_RIGHTS): a file the job's uid cannot read is never copied.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/command_events.h"

namespace weft::train {

// The reader's answer on its socket (SOCK_SEQPACKET): one fixed-size record per event, with the
// announced file's descriptor (SCM_RIGHTS) when kFile is set, and a kEnd record closing each read.
// Root checks every field against the bounds ParseCommandEvent holds lines to.
struct CommandEventRecord {
  enum Type : uint32_t { kMetrics = 1, kCheckpoint = 2, kModel = 3, kEnd = 4 };
  enum Present : uint32_t {
    kEpochsTotal = 1,
    kStepsTotal = 2,
    kSamples = 4,
    kTrainLoss = 8,
    kSamplesPerS = 16,
    kTestAccuracy = 32,
    kTestLoss = 64,
    kFile = 128,  // a descriptor travels with the record
    kMore = 256,  // kEnd: the file holds more than one read takes
  };
  uint32_t type = 0;
  uint32_t present = 0;  // Present bits
  int64_t step = 0, epoch = 0, epochs_total = 0, steps_total = 0, samples = 0;
  double train_loss = 0, samples_per_s = 0, test_accuracy = 0, test_loss = 0;
  uint32_t path_bytes = 0;  // kCheckpoint, kModel: the path relative to WORK_DIR
  char path[kMaxCommandPathBytes] = {};
};

// Sends `bytes` of `data` as one message on the SOCK_SEQPACKET `socket`, with descriptor `fd`
// (SCM_RIGHTS) unless it is -1. False (errno set) when it cannot; never raises SIGPIPE.
bool SendCommandEventMessage(int socket, const void* data, size_t bytes, int fd);

// What one read of the metrics file gave: an event, and for a checkpoint or a model the open
// file (owned by the caller; -1 when the reader could not open it — it logged why).
struct ReadCommandEvent {
  CommandEvent event;
  int fd = -1;
};

class CommandEventReader {
 public:
  struct Options {
    std::string reader_binary;  // weft-event-reader; opened here, run through its descriptor
    int work_fd = -1;           // WORK_DIR, open; the reader gets its own copy
    std::string work_dir;       // WORK_DIR's path, for the paths the program names
    std::string metrics_rel;    // the metrics file, relative to WORK_DIR
    uid_t uid = 0;              // the job's uid and gid: the reader runs as them when we are root
    gid_t gid = 0;
    int timeout_ms = 30000;  // the longest one Read may wait for the reader
  };

  // Starts the reader. FailedPrecondition when weft-event-reader is not there; Internal when it
  // cannot be started. The reader ends when this object is destroyed (its socket closes).
  static absl::StatusOr<std::unique_ptr<CommandEventReader>> Start(const Options& o);
  ~CommandEventReader();
  CommandEventReader(const CommandEventReader&) = delete;
  CommandEventReader& operator=(const CommandEventReader&) = delete;

  // Everything appended to the metrics file since the last Read, in order. Unavailable, naming
  // how it ended, when the reader is gone, does not answer within timeout_ms, or sends a record
  // that does not check out (it is then killed).
  absl::StatusOr<std::vector<ReadCommandEvent>> Read();

  // Whether the last Read left lines in the file (it reads at most 512 KiB at a time).
  bool more() const { return more_; }
  pid_t pid() const { return pid_; }

 private:
  CommandEventReader(pid_t pid, int socket, Options o) : pid_(pid), socket_(socket), o_(o) {}
  absl::Status Fail(const std::string& why);

  pid_t pid_;
  int socket_;
  Options o_;
  bool failed_ = false;
  bool more_ = false;
};

// weft-event-reader's main loop: socket and WORK_DIR are open descriptors; each byte received
// asks for one read of WORK_DIR/`metrics_rel`, answered by its events and an end record. Returns
// the process's exit code (0 when weft-learner closes the socket).
int RunCommandEventReader(int socket, int work_fd, const std::string& work_dir,
                          const std::string& metrics_rel);

}  // namespace weft::train
