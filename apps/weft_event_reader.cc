// weft-event-reader: reads a command job's metrics file for weft-learner as the job's uid, with no
// new privileges (train/command_event_reader.h). weft-learner starts it with its socket on
// descriptor 3 and WORK_DIR on 4; it is not run by hand.
#include <fcntl.h>

#include <cstdio>

#include "common/logging.h"
#include "train/command_event_reader.h"

int main(int argc, char** argv) {
  if (argc != 3 || ::fcntl(3, F_GETFD) < 0 || ::fcntl(4, F_GETFD) < 0) {
    std::fprintf(stderr,
                 "weft-event-reader WORK_DIR METRICS_FILE: started by weft-learner, which hands "
                 "it its socket (descriptor 3) and WORK_DIR (descriptor 4)\n");
    return 2;
  }
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ learner (event reader): %v");
  return weft::train::RunCommandEventReader(3, 4, argv[1], argv[2]);
}
