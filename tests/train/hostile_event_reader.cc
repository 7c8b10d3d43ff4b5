// A stand-in for weft-event-reader that has been taken over by the program it reads: it answers
// weft-learner's first request with what argv[2] names, to show that root checks every record.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>

#include "train/command_event_reader.h"

using weft::train::CommandEventRecord;

namespace {

void Send(const void* data, size_t bytes, int fd = -1) {
  weft::train::SendCommandEventMessage(3, data, bytes, fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string mode = argv[2];
  char request;
  if (::recv(3, &request, 1, 0) != 1) return 1;
  CommandEventRecord r;
  r.type = CommandEventRecord::kMetrics;
  r.step = 1;
  if (mode == "silent") {
    ::pause();
  } else if (mode == "exit") {
    return 3;
  } else if (mode == "short") {
    Send(&r, 10);
  } else if (mode == "nan-accuracy") {
    r.present = CommandEventRecord::kTestAccuracy;
    r.test_accuracy = std::nan("");
    Send(&r, sizeof r);
  } else if (mode == "negative-step") {
    r.step = -5;
    Send(&r, sizeof r);
  } else if (mode == "stray-file") {  // a descriptor with a record that announces no file
    Send(&r, sizeof r, ::open("/etc/hostname", O_RDONLY));
  } else if (mode == "path-outside") {
    r.type = CommandEventRecord::kCheckpoint;
    std::strcpy(r.path, "../../etc/shadow");
    r.path_bytes = std::strlen(r.path);
    Send(&r, sizeof r);
  } else if (mode == "good") {
    Send(&r, sizeof r);
  }
  CommandEventRecord end;
  end.type = CommandEventRecord::kEnd;
  Send(&end, sizeof end);
  while (::recv(3, &request, 1, 0) == 1) Send(&end, sizeof end);
  return 0;
}
