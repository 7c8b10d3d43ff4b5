#include "scheduler/placement.h"

#include <algorithm>
#include <limits>

namespace weft::scheduler {

int LearnerSlots(const Resources& free, const Resources& per, int cap) {
  int slots = cap;
  if (per.gpus > 0) slots = std::min<int64_t>(slots, std::max(0, free.gpus) / per.gpus);
  if (per.memory_mb > 0) {
    slots = std::min<int64_t>(slots, std::max<int64_t>(0, free.memory_mb) / per.memory_mb);
  }
  if (per.cpus > 0)
    slots = std::min<int64_t>(slots, static_cast<int64_t>(free.cpus / per.cpus + 1e-9));
  return std::max(0, slots);
}

namespace {
constexpr int kMaxSlots = 4096;  // per node, for learners that need nothing countable

bool SameShape(const Resources& a, const Resources& b) {
  return a.cpus == b.cpus && a.memory_mb == b.memory_mb && a.gpus == b.gpus;
}
}  // namespace

FreeMap::FreeMap(const std::vector<Node>& nodes) : nodes_(nodes), reserved_(nodes.size(), 0) {
  free_.reserve(nodes.size());
  index_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    free_.push_back(nodes[i].capacity);
    total_free_ += nodes[i].capacity;
    index_.emplace(nodes[i].name, static_cast<int>(i));
  }
}

int FreeMap::Index(const std::string& node) const {
  auto it = index_.find(node);
  return it == index_.end() ? -1 : it->second;
}

void FreeMap::IndexFor(const Resources& per) {
  if (indexed_ && SameShape(per, indexed_per_)) return;
  indexed_ = true;
  indexed_per_ = per;
  slots_.assign(free_.size(), 0);
  int top = 0;
  for (size_t i = 0; i < free_.size(); ++i) {
    slots_[i] = reserved_[i] ? 0 : LearnerSlots(free_[i], per, kMaxSlots);
    top = std::max(top, slots_[i]);
  }
  buckets_.assign(top + 1, {});
  for (size_t i = 0; i < free_.size(); ++i) buckets_[slots_[i]].insert(static_cast<int>(i));
}

void FreeMap::Adjust(int node, const Resources& per, int learners) {
  for (int k = 0; k < learners; ++k) {
    free_[node] -= per;
    if (!reserved_[node]) total_free_ -= per;
  }
  if (!indexed_) return;
  int s = reserved_[node] ? 0 : LearnerSlots(free_[node], indexed_per_, kMaxSlots);
  if (s == slots_[node]) return;
  buckets_[slots_[node]].erase(node);
  if (s >= static_cast<int>(buckets_.size())) buckets_.resize(s + 1);
  buckets_[s].insert(node);
  slots_[node] = s;
}

void FreeMap::Commit(const std::vector<std::pair<int, int>>& taken, const Resources& per,
                     std::vector<std::string>* out) {
  out->clear();
  for (auto [i, k] : taken) {
    Adjust(i, per, k);
    out->insert(out->end(), k, nodes_[i].name);
  }
}

std::vector<size_t> KeepUnchanged(const std::vector<JobRequest>& jobs,
                                  const std::vector<int>& count, FreeMap* free) {
  std::vector<size_t> changed;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (static_cast<int>(jobs[i].allocation.size()) == count[i]) {
      free->Take(jobs[i]);
    } else {
      changed.push_back(i);
    }
  }
  return changed;
}

int FreeMap::TakeMostFree(int need, const std::vector<int>& skip,
                          std::vector<std::pair<int, int>>* taken) const {
  for (int s = static_cast<int>(buckets_.size()) - 1; s > 0 && need > 0; --s) {
    for (int i : buckets_[s]) {
      if (need == 0) break;
      if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
      int take = std::min(s, need);
      taken->emplace_back(i, take);
      need -= take;
    }
  }
  return need;
}

void FreeMap::Take(const JobRequest& job) {
  for (const std::string& n : job.allocation) {
    int i = Index(n);
    if (i >= 0) Adjust(i, job.per_learner, 1);
  }
}

bool FreeMap::PlaceMostFree(int learners, const Resources& per, std::vector<std::string>* out) {
  IndexFor(per);
  // Dry run over the buckets: the most free node (lowest index on ties) takes min(slots, need);
  // its slots drop below every untouched node of that bucket, so the next pick is the next node
  // of the same bucket or a lower bucket.
  std::vector<std::pair<int, int>> taken;  // (node, learners)
  if (TakeMostFree(learners, {}, &taken) > 0) return false;
  Commit(taken, per, out);
  return true;
}

bool FreeMap::PlacePacked(int learners, const Resources& per,
                          const std::vector<std::string>& preferred, std::vector<std::string>* out,
                          bool one_node) {
  IndexFor(per);
  // Current nodes first, in the order the job holds them.
  std::vector<int> mine;
  for (const std::string& n : preferred) {
    int i = Index(n);
    if (i >= 0 && std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
  }
  std::vector<std::pair<int, int>> taken;
  // A node that alone holds the whole job: one of its own, else the smallest such node (leaves
  // the big holes for big jobs), lowest index on ties.
  int whole = -1;
  for (int i : mine) {
    if (SlotsAt(i) >= learners) {
      whole = i;
      break;
    }
  }
  for (int s = learners; whole < 0 && s < static_cast<int>(buckets_.size()); ++s) {
    if (!buckets_[s].empty()) whole = *buckets_[s].begin();
  }
  if (whole >= 0) {
    taken.emplace_back(whole, learners);
  } else if (one_node) {
    return false;
  } else {
    int need = learners;
    for (int i : mine) {
      int take = std::min(SlotsAt(i), need);
      if (take > 0) taken.emplace_back(i, take);
      need -= take;
    }
    if (TakeMostFree(need, mine, &taken) > 0) return false;
  }
  Commit(taken, per, out);
  return true;
}

void FreeMap::Reserve(int node) {
  if (node < 0 || node >= static_cast<int>(free_.size()) || reserved_[node]) return;
  reserved_[node] = 1;
  total_free_ -= free_[node];
  Adjust(node, Resources{}, 0);
}

bool FreeMap::PlaceSpread(int learners, const Resources& per, std::vector<std::string>* out) {
  IndexFor(per);
  std::vector<int> order;  // nodes with room, most free first
  for (int s = static_cast<int>(buckets_.size()) - 1; s > 0; --s) {
    order.insert(order.end(), buckets_[s].begin(), buckets_[s].end());
  }
  std::vector<int> room(order.size());
  int total = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    room[k] = SlotsAt(order[k]);
    total += room[k];
  }
  if (total < learners) return false;
  std::vector<int> take(order.size(), 0);
  for (int need = learners; need > 0;) {
    for (size_t k = 0; k < order.size() && need > 0; ++k) {
      if (take[k] < room[k]) {
        ++take[k];
        --need;
      }
    }
  }
  out->clear();
  for (size_t k = 0; k < order.size(); ++k) {
    if (take[k] == 0) continue;
    Adjust(order[k], per, take[k]);
    out->insert(out->end(), take[k], nodes_[order[k]].name);
  }
  return true;
}

NodeCounts CountsOf(const std::vector<std::string>& learner_nodes) {
  NodeCounts counts;
  for (size_t i = 0; i < learner_nodes.size(); ++i) {
    if (i > 0 && learner_nodes[i] == learner_nodes[i - 1]) {
      ++counts.back();
    } else {
      counts.push_back(1);
    }
  }
  return counts;
}

NodeCounts PackedCounts(int learners, int per_node) {
  NodeCounts counts;
  if (per_node <= 0) return counts;
  for (; learners >= per_node; learners -= per_node) counts.push_back(per_node);
  if (learners > 0) counts.push_back(learners);
  return counts;
}

Decisions PlaceCounts(const ClusterSnapshot& snapshot, const std::vector<int>& count,
                      const std::function<Waiting(size_t job, bool outranked)>& why) {
  const auto& jobs = snapshot.jobs;
  Decisions d;
  FreeMap free(snapshot.nodes);
  std::vector<int> counts = count;
  std::vector<bool> held(jobs.size(), false);  // preempted, its nodes held this round
  if (!snapshot.preemption_frees_at_once) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      const int holds = static_cast<int>(jobs[i].allocation.size());
      if (holds == 0 || counts[i] == holds) continue;
      if (counts[i] > holds) {
        counts[i] = holds;  // no growth here: it keeps what it has
      } else {
        held[i] = true;
        free.Take(jobs[i]);
        d.preempted.push_back(jobs[i].job_id);
      }
    }
  }
  std::vector<size_t> changed = KeepUnchanged(jobs, counts, &free);
  std::stable_sort(changed.begin(), changed.end(),
                   [&](size_t a, size_t b) { return count[a] > count[b]; });
  std::vector<bool> placed(jobs.size(), true);
  for (size_t i : changed) {
    const JobRequest& j = jobs[i];
    if (held[i]) {
      placed[i] = false;
      continue;
    }
    Placement p;
    p.job_id = j.job_id;
    if (counts[i] > 0 &&
        free.PlacePacked(counts[i], j.per_learner, j.allocation, &p.learner_nodes, j.one_node)) {
      d.placements.push_back(std::move(p));
      continue;
    }
    if (!j.Waiting()) d.preempted.push_back(j.job_id);
    placed[i] = false;
  }
  if (!snapshot.explain) return d;
  // Every job that waits after this round, also one that waited before and still gets nothing.
  const bool preempting = std::find(held.begin(), held.end(), true) != held.end();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!placed[i] || (jobs[i].Waiting() && counts[i] == 0)) {
      if (preempting && jobs[i].Waiting() && counts[i] > 0) {
        d.waiting.push_back({jobs[i].job_id, WaitCode::kPreempting,
                             "waiting: running jobs are checkpointing to make room for it"});
      } else {
        d.waiting.push_back(why(i, counts[i] == 0));
      }
    }
  }
  return d;
}

}  // namespace weft::scheduler
