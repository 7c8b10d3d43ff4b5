#include "scheduler/shares.h"

#include <algorithm>

namespace weft::scheduler {
namespace {

double Weight(const TenantShare& s) { return s.weight > 0 ? s.weight : 1; }

}  // namespace

double DominantShare(const Resources& used, const Resources& total, double weight) {
  double share = 0;
  if (total.cpus > 0) share = std::max(share, used.cpus / total.cpus);
  if (total.memory_mb > 0) {
    share = std::max(share, static_cast<double>(used.memory_mb) / total.memory_mb);
  }
  if (total.gpus > 0) share = std::max(share, static_cast<double>(used.gpus) / total.gpus);
  return share / (weight > 0 ? weight : 1);
}

Resources TotalCapacity(const std::vector<Node>& nodes) {
  Resources total;
  for (const Node& n : nodes) total += n.capacity;
  return total;
}

std::map<std::string, TenantShares> ComputeTenantShares(const ClusterSnapshot& snapshot) {
  std::map<std::string, TenantShares> out;
  for (const auto& [name, share] : snapshot.tenants) out[name].share = share;
  for (const JobRequest& j : snapshot.jobs) {
    TenantShares& t = out[j.tenant];  // an unlisted tenant: no quota, weight 1
    if (j.Waiting()) {
      ++t.waiting_jobs;
    } else {
      ++t.running_jobs;
      t.used += j.per_learner.Times(static_cast<int>(j.allocation.size()));
    }
  }
  const Resources total = TotalCapacity(snapshot.nodes);
  double weights = 0;
  for (auto& [name, t] : out) {
    t.dominant_share = DominantShare(t.used, total, 1);
    if (t.running_jobs + t.waiting_jobs > 0) weights += Weight(t.share);
  }
  for (auto& [name, t] : out) {
    if (t.running_jobs + t.waiting_jobs > 0) t.fair_share = Weight(t.share) / weights;
  }
  return out;
}

}  // namespace weft::scheduler
