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
  if (per.cpus > 0) slots = std::min<int64_t>(slots, static_cast<int64_t>(free.cpus / per.cpus + 1e-9));
  return std::max(0, slots);
}

FreeMap::FreeMap(const std::vector<Node>& nodes) : nodes_(nodes) {
  free_.reserve(nodes.size());
  index_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    free_.push_back(nodes[i].capacity);
    index_.emplace(nodes[i].name, static_cast<int>(i));
  }
}

int FreeMap::Index(const std::string& node) const {
  auto it = index_.find(node);
  return it == index_.end() ? -1 : it->second;
}

void FreeMap::Take(const JobRequest& job) {
  for (const std::string& n : job.allocation) {
    int i = Index(n);
    if (i >= 0) free_[i] -= job.per_learner;
  }
}

bool FreeMap::PlaceMostFree(int learners, const Resources& per, std::vector<std::string>* out) {
  std::vector<std::pair<int, int>> taken;  // (node, learners)
  int need = learners;
  while (need > 0) {
    int best = -1, best_slots = 0;
    for (size_t i = 0; i < free_.size(); ++i) {
      int s = LearnerSlots(free_[i], per, std::numeric_limits<int>::max());
      if (s > best_slots) {
        best_slots = s;
        best = static_cast<int>(i);
      }
    }
    if (best < 0) break;
    int take = std::min(best_slots, need);
    for (int k = 0; k < take; ++k) free_[best] -= per;
    taken.emplace_back(best, take);
    need -= take;
  }
  if (need > 0) {  // undo
    for (auto [i, k] : taken) {
      for (int j = 0; j < k; ++j) free_[i] += per;
    }
    return false;
  }
  out->clear();
  for (auto [i, k] : taken) out->insert(out->end(), k, nodes_[i].name);
  return true;
}

bool FreeMap::PlacePacked(int learners, const Resources& per,
                          const std::vector<std::string>& preferred,
                          std::vector<std::string>* out) {
  // Current nodes first (most learners there first), then the other nodes by most free slots.
  std::vector<int> order;
  std::vector<char> seen(free_.size(), 0);
  for (const std::string& n : preferred) {
    int i = Index(n);
    if (i >= 0 && !seen[i]) {
      seen[i] = 1;
      order.push_back(i);
    }
  }
  std::vector<int> rest;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (!seen[i]) rest.push_back(static_cast<int>(i));
  }
  std::vector<int> slots(free_.size());
  for (size_t i = 0; i < free_.size(); ++i) slots[i] = LearnerSlots(free_[i], per, learners);
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return slots[a] > slots[b]; });
  // A node that alone holds the whole job beats splitting across current nodes.
  int whole = -1;
  for (int i : order) {
    if (slots[i] >= learners) { whole = i; break; }
  }
  if (whole < 0 && !rest.empty() && slots[rest.front()] >= learners) {
    // Smallest node that fits the whole job: leaves the big holes for big jobs.
    for (int i : rest) {
      if (slots[i] >= learners && (whole < 0 || slots[i] < slots[whole])) whole = i;
    }
  }
  if (whole >= 0) {
    order = {whole};
  } else {
    order.insert(order.end(), rest.begin(), rest.end());
  }
  int need = learners;
  std::vector<std::pair<int, int>> taken;
  for (int i : order) {
    if (need == 0) break;
    int take = std::min(slots[i], need);
    if (take <= 0) continue;
    taken.emplace_back(i, take);
    need -= take;
  }
  if (need > 0) return false;
  out->clear();
  for (auto [i, k] : taken) {
    for (int j = 0; j < k; ++j) free_[i] -= per;
    out->insert(out->end(), k, nodes_[i].name);
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

}  // namespace weft::scheduler
