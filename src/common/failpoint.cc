#include "common/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace weft {
namespace {

struct Config {
  std::string name;
  long hit = 0;
};

std::atomic<const char*> g_variable{"WEFT_FAILPOINT"};
std::atomic<bool> g_enabled{true};

const Config& Current() {
  static const Config config = [] {
    Config c;
    if (!g_enabled.load()) return c;
    const char* v = std::getenv(g_variable.load());
    if (v == nullptr || *v == '\0') return c;
    std::string s = v;
    size_t at = s.find('@');
    c.name = s.substr(0, at);
    c.hit = at == std::string::npos ? 1 : std::strtol(s.c_str() + at + 1, nullptr, 10);
    return c;
  }();
  return config;
}

std::atomic<long> g_hits{0};

}  // namespace

void SetFailpointVariable(const char* env_name, bool enabled) {
  g_variable = env_name;
  g_enabled = enabled;
}

void Failpoint(const char* name) {
  const Config& c = Current();
  if (c.name.empty() || c.name != name) return;
  if (++g_hits == c.hit) {
    static const char msg[] = "failpoint: crashing here\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    kill(getpid(), SIGKILL);
  }
}

}  // namespace weft
