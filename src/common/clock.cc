#include "common/clock.h"

#include <chrono>
#include <ctime>

#include "absl/strings/str_format.h"

namespace weft {

TimeMs SystemClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const SystemClock& SystemClock::Get() {
  static const SystemClock clock;
  return clock;
}

std::string FormatTimeMs(TimeMs t) {
  std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(t % 1000));
}

}  // namespace weft
