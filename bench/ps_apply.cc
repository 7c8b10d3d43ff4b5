// bench/ps_apply.sh: the scale-up parameter server's applier against memcpy (GaDei's claim that
// such a server is "constrained only by the hardware"). For each size, in the same run and
// alternating: memcpy of the parameters' bytes, and the applier taking one published gradient
// (SharedParameterServer::ApplyReady: the finiteness check, SGD, the seqlock, the slot handed
// back), also with SGD momentum and with Adam. Prints bytes of parameters updated per second
// (median of the repeats) and the ratio to memcpy's bytes copied per second; the last line is
// JSON (issue 15's goal: plain SGD ≥ 0.7 × memcpy at the largest size).
//
//   bench_ps_apply [REPEATS]   default 15
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/segment.h"
#include "ps/shared_client.h"
#include "ps/shared_server.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Seconds to copy n floats, median of `repeats`, on buffers touched beforehand.
double MemcpySeconds(int64_t n, int repeats) {
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    auto t1 = Clock::now();
    times.push_back(Seconds(t0, t1));
    src[r % n] += dst[(r * 7) % n];  // keep the copies observable
  }
  return Median(times);
}

// Seconds the applier takes for one gradient of n floats, median of `repeats`.
double ApplySeconds(int64_t n, int repeats, weft::ps::OptimizerConfig optimizer) {
  static int counter = 0;
  std::string name =
      weft::ps::SegmentNameForJob(absl::StrCat("bench-", getpid(), "-", counter++), 1).value();
  weft::ps::ServerConfig config;
  config.num_params = n;
  config.consistency = weft::ps::Consistency::kAsp;
  config.optimizer = optimizer;
  std::vector<float> params(n, 0.5f), grad(n, 1e-3f);
  auto server = weft::ps::SharedParameterServer::Create(name, config, params.data()).value();
  auto client = weft::ps::SharedPsClient::Attach(name, 0).value();
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    if (!client->Publish(grad.data(), r, 10'000).ok()) std::abort();
    auto t0 = Clock::now();
    if (server->ApplyReady() != 1) std::abort();
    auto t1 = Clock::now();
    if (r > 0) times.push_back(Seconds(t0, t1));  // the first touches the optimizer state
  }
  return Median(times);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 15;
  // 100 K floats: about the CNN's parameters (in cache); 1 M; 16 M (64 MB: memory-bound).
  const std::vector<int64_t> sizes = {100'000, 1'000'000, 16'000'000};
  weft::ps::OptimizerConfig sgd, momentum, adam;
  sgd.learning_rate = momentum.learning_rate = 0.01;
  momentum.momentum = 0.9;
  adam.kind = weft::ps::OptimizerKind::kAdam;
  adam.learning_rate = 1e-3;
  std::printf("%12s %14s %14s %8s %14s %14s\n", "params", "memcpy GB/s", "sgd GB/s", "ratio",
              "momentum GB/s", "adam GB/s");
  double memcpy_bps = 0, sgd_bps = 0, momentum_bps = 0, adam_bps = 0;
  for (int64_t n : sizes) {
    const double bytes = static_cast<double>(n) * sizeof(float);
    memcpy_bps = bytes / MemcpySeconds(n, repeats);
    sgd_bps = bytes / ApplySeconds(n, repeats, sgd);
    momentum_bps = bytes / ApplySeconds(n, repeats, momentum);
    adam_bps = bytes / ApplySeconds(n, repeats, adam);
    std::printf("%12lld %14.2f %14.2f %8.3f %14.2f %14.2f\n", static_cast<long long>(n),
                memcpy_bps / 1e9, sgd_bps / 1e9, sgd_bps / memcpy_bps, momentum_bps / 1e9,
                adam_bps / 1e9);
  }
  std::printf(
      "{\"bench\": \"ps_apply\", \"params\": %lld, \"memcpy_bytes_per_s\": %.0f, "
      "\"sgd_bytes_per_s\": %.0f, \"sgd_momentum_bytes_per_s\": %.0f, \"adam_bytes_per_s\": "
      "%.0f, \"ratio\": %.3f}\n",
      static_cast<long long>(sizes.back()), memcpy_bps, sgd_bps, momentum_bps, adam_bps,
      sgd_bps / memcpy_bps);
  return 0;
}
