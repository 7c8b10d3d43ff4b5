// Helpers shared by the parameter-server tests: a fresh segment name per call, a clock the test
// moves by hand, and a small server configuration.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "ps/layout.h"
#include "ps/protocol.h"
#include "ps/segment.h"

namespace weft::ps {

// A name no other test process uses now; one a dead process of the same pid left behind (a test
// killed mid-way) is removed first.
inline std::string FreshSegmentName() {
  static std::atomic<int> counter{0};
  std::string name =
      SegmentNameForJob(absl::StrCat("test-", getpid(), "-", counter.fetch_add(1)), 1).value();
  (void)SharedSegment::Unlink(name);
  return name;
}

// A monotonic clock in ms that only moves when the test says so; share it by reference.
struct ManualClock {
  std::atomic<int64_t> now_ms{1'000'000};
  NowMsFn Fn() {
    return [this] { return now_ms.load(); };
  }
};

// `learners` learners (slots) of `params` parameters in `consistency`, SGD at learning rate 0.5.
inline ServerConfig Config(int learners, int64_t params, Consistency consistency) {
  ServerConfig config;
  config.num_slots = learners;
  config.num_params = params;
  config.consistency = consistency;
  config.optimizer.learning_rate = 0.5;
  return config;
}

}  // namespace weft::ps
