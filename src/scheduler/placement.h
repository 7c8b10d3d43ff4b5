// Placement helpers shared by the policies: counting how many learners fit, the most-free-node
// greedy of the Tiresias and Pollux-artifact simulators, and learner lists <-> per-node counts.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/job_model.h"

namespace weft::scheduler {

// How many learners needing `per` fit in `free` (capped at `cap`). An all-zero request fits
// `cap` times.
int LearnerSlots(const Resources& free, const Resources& per, int cap);

// The free resources of each node after taking away the allocations of `keep` jobs only —
// the picture a policy has when it is free to preempt or resize everything else. Node order
// as in `nodes`. Learner nodes that name no node are ignored.
class FreeMap {
 public:
  explicit FreeMap(const std::vector<Node>& nodes);
  void Take(const JobRequest& job);  // subtract job.allocation
  const std::vector<Resources>& free() const { return free_; }
  int Index(const std::string& node) const;  // -1 if unknown

  // The most-free-node greedy: repeatedly take min(slots, still needed) learners on the node
  // with the most free learner slots, ties to the lowest node index (Tiresias simulator,
  // Gu et al. NSDI'19; Pollux artifact). All `learners` or nothing: returns false and changes
  // nothing when they do not fit.
  bool PlaceMostFree(int learners, const Resources& per, std::vector<std::string>* out);

  // Packs `learners` onto as few nodes as possible, preferring nodes in `preferred` (the job's
  // current nodes) so that a resize moves as little as possible. All or nothing; with `one_node`,
  // all on one node or nothing.
  bool PlacePacked(int learners, const Resources& per, const std::vector<std::string>& preferred,
                   std::vector<std::string>* out, bool one_node = false);

  // Spreads `learners` over as many nodes as possible: one learner per node per pass, most free
  // nodes first (ties to the lowest index). All or nothing.
  bool PlaceSpread(int learners, const Resources& per, std::vector<std::string>* out);

  // Free resources summed over the nodes that are not reserved: a gang that does not fit this
  // fits nowhere.
  const Resources& TotalFree() const { return total_free_; }

  // Marks `node` unusable for the rest of this FreeMap's life (a reservation): no placement
  // takes learners there.
  void Reserve(int node);

 private:
  // Nodes bucketed by free learner slots for one learner shape, kept current as learners are
  // taken, rebuilt when a call asks about another shape: placement costs O(nodes touched), not
  // O(nodes), per job.
  void IndexFor(const Resources& per);
  void Adjust(int node, const Resources& delta, int learners);  // free_[node] -= delta × learners
  // Takes (node, learners) pairs and lists the learners' nodes in `out`.
  void Commit(const std::vector<std::pair<int, int>>& taken, const Resources& per,
              std::vector<std::string>* out);
  int SlotsAt(int node) const { return slots_[node]; }
  // The most-free-node walk over the buckets (dry run): takes min(slots, still needed) learners
  // from nodes in descending free-slot order, lowest index first within a bucket, skipping the
  // nodes in `skip`; appends (node, learners) to `taken` and returns how many are still needed.
  int TakeMostFree(int need, const std::vector<int>& skip,
                   std::vector<std::pair<int, int>>* taken) const;

  const std::vector<Node>& nodes_;
  std::vector<Resources> free_;
  std::unordered_map<std::string, int> index_;
  bool indexed_ = false;
  Resources indexed_per_;
  std::vector<int> slots_;
  std::vector<std::set<int>> buckets_;  // buckets_[s] = nodes with s free slots, by index
  std::vector<char> reserved_;
  Resources total_free_;
};

// For policies that decide learner counts first and place second: jobs whose count[i] equals what
// they hold keep their nodes (taken out of `free`); the indices of the others are returned.
std::vector<size_t> KeepUnchanged(const std::vector<JobRequest>& jobs,
                                  const std::vector<int>& count, FreeMap* free);

// The last step of the policies that decide learner counts first (goodput, targets): jobs whose
// count is unchanged keep their nodes; the others are packed, largest first, preferring the nodes
// they hold; a running job that gets none (or does not fit) is preempted.
// Without snapshot.preemption_frees_at_once (weftd), nodes are free only once learners have
// left them: a preempted job's nodes stay taken this round; a running elastic job
// (min_learners < max_learners, not one_node) is resized in place — a grow keeps its learners
// where they are and adds the new ones after them (packed, its own nodes first; if they do not
// fit it keeps what it has), a shrink keeps the first `count` of its learners and the leavers'
// nodes stay taken this round — and a running rigid job is never grown, and is preempted when
// it would shrink (it restarts at the size a later round gives it). A resize's Placement::reason
// names `policy`: "grow to 3: the goodput policy's speedup gain is worth the resize", "shrink to
// 1: the goodput policy's sizing by measured speedup, against the other jobs'". With
// snapshot.explain, every job left waiting (in snapshot order) gets `why(i, outranked)`: outranked
// when its count is 0, otherwise it got learners that no node set has room for — or, when it could
// not be placed because this round's preempted or shrunk jobs still hold their nodes, the
// kPreempting reason.
Decisions PlaceCounts(const ClusterSnapshot& snapshot, const std::vector<int>& count,
                      const std::function<Waiting(size_t job, bool outranked)>& why,
                      const std::string& policy);

// Whether resizing a running job from `from` to `to` learners (packed on nodes of `per_node`)
// pays for itself: the seconds it saves on the rest of the job, RemainingProgress × (1/G(from) −
// 1/G(to)) with G the model's Goodput, exceed what the resize costs it (ResizeSeconds). True
// when the model knows no remaining progress (nothing to weigh) or the resize is free; false
// when the job would not be faster at `to`. Pollux weighs a reallocation the same way, against
// its restart penalty (Qiao et al., OSDI'21, §4.2).
bool ResizePays(const JobModel& model, int from, int to, int per_node);

// After a policy sized the jobs: a running job given more learners than it holds keeps what it
// holds when growing to that count does not pay (ResizePays); the learners it would have taken
// stay free this round. Jobs without a model are left as they are.
void KeepGrowsThatPay(const std::vector<JobRequest>& jobs, int per_node, std::vector<int>* count);

// Run-length encoding of a learner list in list order: {a,a,b} -> (2,1). This is the placement
// the Pollux artifact looks step times up by.
NodeCounts CountsOf(const std::vector<std::string>& learner_nodes);

// `learners` packed onto nodes of `per_node` learners: 6 on nodes of 4 -> (4,2).
NodeCounts PackedCounts(int learners, int per_node);

}  // namespace weft::scheduler
