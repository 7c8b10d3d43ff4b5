// Time as weft passes it around: unix milliseconds in an int64. A Clock interface lets tests
// and the simulator control "now"; the scheduler never reads a clock itself.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

// Milliseconds since the unix epoch (UTC).
using TimeMs = int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  // Current wall time, unix milliseconds.
  virtual TimeMs NowMs() const = 0;
};

// The real wall clock (std::chrono::system_clock).
class SystemClock : public Clock {
 public:
  TimeMs NowMs() const override;
  // A process-wide instance.
  static const SystemClock& Get();
};

// RFC 3339 UTC text with milliseconds, e.g. "2026-11-21T22:35:50.123Z".
std::string FormatTimeMs(TimeMs t);

}  // namespace weft
