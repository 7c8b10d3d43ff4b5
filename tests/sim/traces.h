// Where the Pollux artifact's traces are: $WEFT_TRACES, else ../shared/traces beside the repo.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace weft::testing {

inline std::string TracesDir() {
  if (const char* env = std::getenv("WEFT_TRACES")) return env;
  return std::string(WEFT_SOURCE_DIR) + "/../shared/traces";
}

inline bool HaveTraces() {
  struct stat st;
  return stat((TracesDir() + "/pollux/app-traces").c_str(), &st) == 0;
}

}  // namespace weft::testing

#define WEFT_REQUIRE_TRACES()                                   \
  if (!weft::testing::HaveTraces())                             \
  GTEST_SKIP() << "no traces at " << weft::testing::TracesDir() \
               << " (set WEFT_TRACES or put ../shared beside the repository)"
