#include "scheduler/cluster.h"

namespace weft::scheduler {

// Small tolerance so 0.1 + 0.2 cpus still fits in 0.3.
constexpr double kCpuEpsilon = 1e-9;

bool Resources::Fits(const Resources& r) const {
  return r.cpus <= cpus + kCpuEpsilon && r.memory_mb <= memory_mb && r.gpus <= gpus;
}

Resources& Resources::operator+=(const Resources& o) {
  cpus += o.cpus;
  memory_mb += o.memory_mb;
  gpus += o.gpus;
  return *this;
}

Resources& Resources::operator-=(const Resources& o) {
  cpus -= o.cpus;
  memory_mb -= o.memory_mb;
  gpus -= o.gpus;
  return *this;
}

Resources Resources::Times(int n) const { return Resources{cpus * n, memory_mb * n, gpus * n}; }

const char* WaitCodeName(WaitCode code) {
  switch (code) {
    case WaitCode::kNextRound:
      return "next_round";
    case WaitCode::kRestartBackoff:
      return "restart_backoff";
    case WaitCode::kCheckpointing:
      return "checkpointing";
    case WaitCode::kQuota:
      return "quota";
    case WaitCode::kPriority:
      return "priority";
    case WaitCode::kNoRoom:
      return "no_room";
    case WaitCode::kReservation:
      return "reservation";
    case WaitCode::kBehindHead:
      return "behind_head";
    case WaitCode::kOutranked:
      return "outranked";
    case WaitCode::kPreempting:
      return "preempting";
  }
  return "unknown";
}

Resources Node::Free() const {
  Resources f = capacity;
  f -= allocated;
  return f;
}

std::vector<GpuDevice> CountedGpus(int gpus) {
  std::vector<GpuDevice> out;
  for (int i = 0; i < gpus; ++i) out.push_back({i, "", ""});
  return out;
}

std::string NameFor(const JobRequest& job, const JobRequest& other) {
  return job.tenant == other.tenant ? other.job_id : "a job of another tenant";
}

}  // namespace weft::scheduler
