// libFuzzer target: a command job's metrics lines (train/command_events.h), which the tenant's
// program writes. Every input is refused with InvalidArgument or parsed into an event whose
// path (if any) is relative, inside WORK_DIR and free of "." and ".." components; a crash or a
// sanitizer report fails.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_split.h"
#include "train/command_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  auto e = weft::train::ParseCommandEvent(line, "/data/jobs/job-1/work/rank-0");
  if (!e.ok()) {
    if (!absl::IsInvalidArgument(e.status())) {
      std::cerr << "fuzz_command_events: unexpected " << e.status() << "\n";
      std::abort();
    }
    return 0;
  }
  const bool announces = e->kind != weft::train::CommandEvent::Kind::kMetrics;
  if (announces == e->path.empty() || (!e->path.empty() && e->path[0] == '/')) {
    std::cerr << "fuzz_command_events: path '" << e->path << "' for kind "
              << static_cast<int>(e->kind) << "\n";
    std::abort();
  }
  for (absl::string_view part : absl::StrSplit(e->path, '/')) {
    if (announces && (part.empty() || part == "." || part == "..")) {
      std::cerr << "fuzz_command_events: path '" << e->path << "' leaves WORK_DIR\n";
      std::abort();
    }
  }
  if (e->step < 0 || (e->test_accuracy && (*e->test_accuracy < 0 || *e->test_accuracy > 1))) {
    std::cerr << "fuzz_command_events: out-of-range numbers accepted\n";
    std::abort();
  }
  return 0;
}
