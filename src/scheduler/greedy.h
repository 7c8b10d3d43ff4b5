// Greedy growth by marginal value, shared by the policies that size jobs learner by learner:
// Optimus (Peng et al., EuroSys'18: the job whose next learner saves the most remaining time) and
// weft's goodput policy (Pollux, Qiao et al., OSDI'21: the best weighted speedup per learner).
#pragma once

#include <cstddef>
#include <queue>
#include <utility>
#include <vector>

namespace weft::scheduler {

// Repeatedly grows the job of highest `value(i)` (ties to the lower index) by calling
// `grow(i)`, until no job has a positive value. Values are evaluated lazily: an entry whose
// value changed since it was computed (others took the room it counted on) goes back with its
// new value instead of growing. `value` must be deterministic given the state `grow` changes.
template <typename Value, typename Grow>
void GrowByMarginalValue(size_t jobs, Value value, Grow grow) {
  using Entry = std::pair<double, size_t>;
  auto worse = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (size_t i = 0; i < jobs; ++i) {
    if (double v = value(i); v > 0) heap.emplace(v, i);
  }
  while (!heap.empty()) {
    auto [v, i] = heap.top();
    heap.pop();
    if (double fresh = value(i); fresh != v) {
      if (fresh > 0) heap.emplace(fresh, i);
      continue;
    }
    grow(i);
    if (double next = value(i); next > 0) heap.emplace(next, i);
  }
}

}  // namespace weft::scheduler
