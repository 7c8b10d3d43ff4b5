// Helpers shared by the parameter-server tests: a fresh segment name per call and a clock the
// test moves by hand.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
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

}  // namespace weft::ps
