#include "scheduler/placement.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

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

bool ResizePays(const JobModel& model, int from, int to, int per_node) {
  const double left = model.RemainingProgress(), cost = model.ResizeSeconds();
  if (!(left > 0) || !(cost > 0)) return true;
  const double g_from = model.Goodput(PackedCounts(from, per_node));
  const double g_to = model.Goodput(PackedCounts(to, per_node));
  if (!(g_to > g_from)) return false;
  if (!(g_from > 0)) return true;
  return left * (1 / g_from - 1 / g_to) > cost;
}

void KeepGrowsThatPay(const std::vector<JobRequest>& jobs, int per_node, std::vector<int>* count) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int holds = static_cast<int>(jobs[i].allocation.size());
    if (holds > 0 && (*count)[i] > holds && jobs[i].model != nullptr &&
        !ResizePays(*jobs[i].model, holds, (*count)[i], per_node)) {
      (*count)[i] = holds;
    }
  }
}

namespace {

// What weftd's round does with a running job whose count changed (PlaceCounts).
enum class Change { kNone, kPreempt, kShrinkInPlace, kGrowInPlace };

// Whether weftd resizes `j` in place (control/elastic_membership.h): an elastic gang. A
// one-node job (a parameter server's) restarts.
bool ResizesInPlace(const JobRequest& j) { return j.min_learners < j.max_learners && !j.one_node; }

// Decides, for weftd, each running job whose count changed: grown or shrunk in place (its
// learners stay taken in `free`: a grow adds to them, a shrink's leavers hold their nodes until
// they exit), or, rigid, kept at its size (no growth) or preempted (its nodes held).
std::vector<Change> WeftdChanges(const std::vector<JobRequest>& jobs, std::vector<int>& counts,
                                 FreeMap& free, Decisions& d) {
  std::vector<Change> change(jobs.size(), Change::kNone);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int holds = static_cast<int>(jobs[i].allocation.size());
    if (holds == 0 || counts[i] == holds) continue;
    if (counts[i] > 0 && ResizesInPlace(jobs[i])) {
      free.Take(jobs[i]);
      change[i] = counts[i] > holds ? Change::kGrowInPlace : Change::kShrinkInPlace;
    } else if (counts[i] > holds) {
      counts[i] = holds;  // no growth here: it keeps what it has
    } else {
      change[i] = Change::kPreempt;
      free.Take(jobs[i]);
      d.preempted.push_back(jobs[i].job_id);
    }
  }
  return change;
}

// The kPreempting reason of a job that waits for nodes this round's decisions free later.
std::string FreedLater(bool preempting, bool shrinking) {
  const char* what = preempting && shrinking ? "checkpointing and shrinking"
                     : preempting            ? "checkpointing"
                                             : "shrinking";
  return absl::StrCat("waiting: running jobs are ", what, " to make room for it");
}

}  // namespace

Decisions PlaceCounts(const ClusterSnapshot& snapshot, const std::vector<int>& count,
                      const std::function<Waiting(size_t job, bool outranked)>& why,
                      const std::string& policy) {
  const auto& jobs = snapshot.jobs;
  Decisions d;
  FreeMap free(snapshot.nodes);
  std::vector<int> counts = count;
  std::vector<Change> change = snapshot.preemption_frees_at_once
                                   ? std::vector<Change>(jobs.size(), Change::kNone)
                                   : WeftdChanges(jobs, counts, free, d);
  std::vector<size_t> changed = KeepUnchanged(jobs, counts, &free);
  std::stable_sort(changed.begin(), changed.end(),
                   [&](size_t a, size_t b) { return count[a] > count[b]; });
  std::vector<bool> placed(jobs.size(), true);
  bool preempting = false, shrinking = false;
  for (size_t i : changed) {
    const JobRequest& j = jobs[i];
    Placement p;
    p.job_id = j.job_id;
    switch (change[i]) {
      case Change::kPreempt:
        preempting = true;
        placed[i] = false;
        continue;
      case Change::kShrinkInPlace:
        shrinking = true;
        p.learner_nodes.assign(j.allocation.begin(), j.allocation.begin() + counts[i]);
        p.reason = absl::StrCat("shrink to ", counts[i], ": the ", policy,
                                " policy's sizing by measured speedup, against the other jobs'");
        d.placements.push_back(std::move(p));
        continue;
      case Change::kGrowInPlace: {
        // Where the new learners fit, after the ones it has; else it keeps what it has.
        std::vector<std::string> more;
        const int holds = static_cast<int>(j.allocation.size());
        if (free.PlacePacked(counts[i] - holds, j.per_learner, j.allocation, &more)) {
          p.learner_nodes = j.allocation;
          p.learner_nodes.insert(p.learner_nodes.end(), more.begin(), more.end());
          p.reason = absl::StrCat("grow to ", counts[i], ": the ", policy,
                                  " policy's speedup gain is worth the resize");
          d.placements.push_back(std::move(p));
        }
        continue;
      }
      case Change::kNone:
        break;
    }
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
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!placed[i] || (jobs[i].Waiting() && counts[i] == 0)) {
      if ((preempting || shrinking) && jobs[i].Waiting() && counts[i] > 0) {
        d.waiting.push_back(
            {jobs[i].job_id, WaitCode::kPreempting, FreedLater(preempting, shrinking)});
      } else {
        d.waiting.push_back(why(i, counts[i] == 0));
      }
    }
  }
  return d;
}

}  // namespace weft::scheduler
