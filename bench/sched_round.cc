// One scheduling round of each policy on a large synthetic cluster (Google Benchmark):
// 1k active jobs × 512 nodes and 10k jobs × 2k nodes, 4 GPUs per node, about half the jobs
// running, 8 tenants (half with quotas, weights 1–3) and three priorities. Goals: ≤ 10 ms and ≤ 100
// ms per round. Policies are reused across iterations, so stateful ones (Tiresias) are measured in
// their steady state. Baseline in the same run: the cost of copying the snapshot (what any round
// costs before deciding anything).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "scheduler/job_model.h"
#include "scheduler/placement.h"
#include "scheduler/policies.h"

namespace {

using namespace weft::scheduler;

// Amdahl-style job: a fixed compute per step split across learners plus a per-node sync cost;
// goodput = learners' throughput discounted by a statistical efficiency that falls with scale.
class SyntheticModel : public JobModel {
 public:
  SyntheticModel(double compute_s, double sync_s, double steps)
      : compute_(compute_s), sync_(sync_s), steps_(steps) {}
  double StepSeconds(const NodeCounts& p) const override {
    int r = 0;
    for (int c : p) r += c;
    return compute_ / std::max(1, r) + (p.size() > 1 ? sync_ * std::log2(p.size() + 1) : 0) + 1e-3;
  }
  double RemainingSteps() const override { return steps_; }
  double Goodput(const NodeCounts& p) const override {
    int r = 0;
    for (int c : p) r += c;
    if (r == 0) return 0;
    double efficiency = 64.0 / (64.0 + r);
    return efficiency / StepSeconds(p);
  }

 private:
  double compute_, sync_, steps_;
};

struct World {
  ClusterSnapshot snapshot;
  std::vector<std::unique_ptr<SyntheticModel>> models;
};

World MakeWorld(int jobs, int nodes) {
  World w;
  std::mt19937_64 rng(42);
  for (int n = 0; n < nodes; ++n) {
    Node node;
    node.name = absl::StrCat("n", n);
    node.capacity.gpus = 4;
    w.snapshot.nodes.push_back(node);
  }
  const int sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 16};
  std::uniform_int_distribution<int> pick(0, 8);
  std::uniform_real_distribution<double> unit(0, 1);
  FreeMap free(w.snapshot.nodes);
  int gpus = 4 * nodes;
  int running_gpus = 0;
  for (int i = 0; i < jobs; ++i) {
    JobRequest j;
    j.job_id = absl::StrCat("job-", i);
    j.tenant = absl::StrCat("tenant-", i % 8);  // 8 tenants for the fair-share policy
    j.priority = static_cast<int>(i % 3) * 100 - 100;
    j.submitted_ms = i * 1000;
    j.learners = sizes[pick(rng)];
    j.min_learners = 1;
    j.max_learners = 64;
    j.per_learner.gpus = 1;
    j.attained_service = unit(rng) * 3600 * j.learners;
    w.models.push_back(std::make_unique<SyntheticModel>(0.5 + unit(rng), 0.05 * unit(rng),
                                                        1000 + 1e5 * unit(rng)));
    j.model = w.models.back().get();
    // About half the jobs (and at most ~90 % of the GPUs) run.
    if (i % 2 == 0 && running_gpus + j.learners <= gpus * 9 / 10 &&
        free.PlaceMostFree(j.learners, j.per_learner, &j.allocation)) {
      running_gpus += j.learners;
    }
    w.snapshot.jobs.push_back(std::move(j));
  }
  for (int t = 0; t < 8; ++t) {
    TenantShare share;
    share.weight = 1 + t % 3;
    share.has_quota = t % 2 == 0;
    share.quota.gpus = nodes;  // a quarter of the cluster
    share.quota.cpus = 1e9;
    share.quota.memory_mb = int64_t{1} << 40;
    w.snapshot.tenants[absl::StrCat("tenant-", t)] = share;
  }
  for (auto& node : w.snapshot.nodes) node.allocated = {};
  std::unordered_map<std::string, int> index;
  for (size_t n = 0; n < w.snapshot.nodes.size(); ++n) index[w.snapshot.nodes[n].name] = n;
  for (const auto& j : w.snapshot.jobs) {
    for (const auto& n : j.allocation) w.snapshot.nodes[index[n]].allocated.gpus += 1;
  }
  return w;
}

const World& WorldFor(int jobs, int nodes) {
  static std::map<std::pair<int, int>, World> worlds;
  auto key = std::make_pair(jobs, nodes);
  auto it = worlds.find(key);
  if (it == worlds.end()) it = worlds.emplace(key, MakeWorld(jobs, nodes)).first;
  return it->second;
}

void BM_SnapshotCopy(benchmark::State& state) {
  const World& w = WorldFor(state.range(0), state.range(1));
  for (auto _ : state) {
    ClusterSnapshot copy = w.snapshot;
    benchmark::DoNotOptimize(copy);
  }
}

void BM_Round(benchmark::State& state, const std::string& name) {
  const World& w = WorldFor(state.range(0), state.range(1));
  auto policy = MakePolicy(name);
  if (!policy.ok()) {
    state.SkipWithError(std::string(policy.status().message()).c_str());
    return;
  }
  ClusterSnapshot snap = w.snapshot;
  size_t decided = 0;
  for (auto _ : state) {
    snap.now_ms += 60000;
    Decisions d = (*policy)->Schedule(snap);
    decided = d.placements.size() + d.preempted.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["changes"] = decided;
}

}  // namespace

#define WEFT_SIZES ->Args({1000, 512})->Args({10000, 2048})->Unit(benchmark::kMillisecond)
BENCHMARK(BM_SnapshotCopy) WEFT_SIZES;
BENCHMARK_CAPTURE(BM_Round, fifo, std::string("fifo")) WEFT_SIZES;
BENCHMARK_CAPTURE(BM_Round, tiresias, std::string("tiresias")) WEFT_SIZES;
BENCHMARK_CAPTURE(BM_Round, optimus, std::string("optimus")) WEFT_SIZES;
BENCHMARK_CAPTURE(BM_Round, goodput, std::string("goodput")) WEFT_SIZES;
BENCHMARK_CAPTURE(BM_Round, fairshare, std::string("fairshare")) WEFT_SIZES;

BENCHMARK_MAIN();
