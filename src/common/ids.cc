#include "common/ids.h"

#include <random>

namespace weft {
namespace {
constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";

std::string Base36(uint64_t v, int width) {
  std::string s(width, '0');
  for (int i = width - 1; i >= 0; --i) {
    s[i] = kAlphabet[v % 36];
    v /= 36;
  }
  return s;
}
}  // namespace

std::string NewJobId(TimeMs now) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t r = rng() % (36ull * 36 * 36 * 36);
  return "job-" + Base36(static_cast<uint64_t>(now), 9) + "-" + Base36(r, 4);
}

}  // namespace weft
