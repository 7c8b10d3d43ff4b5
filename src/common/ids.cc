#include "common/ids.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
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
std::string RandomHex(int bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes) != 1) {
    std::fprintf(stderr, "weft: the OS random number generator failed\n");
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}
// `prefix`, the time in 9 base-36 characters and 4 random ones (see NewJobId).
std::string TimeSortedId(const char* prefix, TimeMs now) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t r = rng() % (36ull * 36 * 36 * 36);
  return prefix + Base36(static_cast<uint64_t>(now), 9) + "-" + Base36(r, 4);
}
}  // namespace

std::string NewSecretToken() { return "weft_" + RandomHex(32); }

std::string NewTokenId() { return "tok-" + RandomHex(5); }

std::string NewWebhookId() { return "hook-" + RandomHex(5); }

std::string NewWebhookSecret() { return "whsec_" + RandomHex(32); }

std::string NewJobId(TimeMs now) { return TimeSortedId("job-", now); }

std::string NewExperimentId(TimeMs now) { return TimeSortedId("exp-", now); }

}  // namespace weft
