#include "scheduler/tiresias_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

void TiresiasPolicy::UpdateQueues(const ClusterSnapshot& snapshot) {
  // Attach this round's requests; new jobs join the end of queue 0.
  for (auto& [id, st] : state_) st.job = nullptr;
  for (const JobRequest& j : snapshot.jobs) {
    auto [it, inserted] = state_.try_emplace(j.job_id);
    State& st = it->second;
    st.job = &j;
    if (inserted) {
      st.job_id = j.job_id;
      queue0_.push_back(&st);
    }
  }
  // Forget finished jobs.
  auto gone = [](const State* st) { return st->job == nullptr; };
  queue0_.erase(std::remove_if(queue0_.begin(), queue0_.end(), gone), queue0_.end());
  queue1_.erase(std::remove_if(queue1_.begin(), queue1_.end(), gone), queue1_.end());
  for (auto it = state_.begin(); it != state_.end();) {
    it = it->second.job == nullptr ? state_.erase(it) : std::next(it);
  }
  // Account executed time; demote jobs past the threshold, keeping queue 0's order.
  std::vector<State*> still0;
  still0.reserve(queue0_.size());
  for (State* st : queue0_) {
    if (st->running) st->executed_s += (snapshot.now_ms - st->last_check_ms) / 1000.0;
    st->last_check_ms = snapshot.now_ms;
    if (st->running && st->executed_s * st->job->learners >= threshold_s_) {
      st->queue = 1;
      queue1_.push_back(st);
    } else {
      still0.push_back(st);
    }
  }
  queue0_ = std::move(still0);
  for (State* st : queue1_) {
    if (st->queue == 1 && st->last_check_ms != snapshot.now_ms) {
      if (st->running) st->executed_s += (snapshot.now_ms - st->last_check_ms) / 1000.0;
      st->last_check_ms = snapshot.now_ms;
    }
  }
}

std::vector<const JobRequest*> TiresiasPolicy::PickRunning(const ClusterSnapshot& snapshot,
                                                           Decisions* d) {
  // Whole gangs against the cluster's total, in queue order.
  Resources left;
  for (const Node& n : snapshot.nodes) left += n.capacity;
  std::vector<const JobRequest*> run_order;
  for (const auto* q : {&queue0_, &queue1_}) {
    for (State* st : *q) {
      const JobRequest& j = *st->job;
      const Resources gang = j.per_learner.Times(j.learners);
      if (left.Fits(gang)) {
        left -= gang;
        st->running = true;
        run_order.push_back(&j);
        continue;
      }
      st->running = false;
      if (!j.Waiting()) d->preempted.push_back(j.job_id);
      if (snapshot.explain) {
        d->waiting.push_back(
            {j.job_id, WaitCode::kOutranked,
             absl::StrCat("waiting: ", j.learners, " learners do not fit in what queue ", st->queue,
                          " jobs ahead of it leave")});
      }
    }
  }
  return run_order;
}

Decisions TiresiasPolicy::Schedule(const ClusterSnapshot& snapshot) {
  UpdateQueues(snapshot);
  Decisions d;
  std::vector<const JobRequest*> run_order = PickRunning(snapshot, &d);
  // Running jobs keep their nodes; new ones take the most free nodes.
  FreeMap free(snapshot.nodes);
  for (const JobRequest* j : run_order) {
    if (!j->Waiting()) free.Take(*j);
  }
  for (const JobRequest* j : run_order) {
    if (!j->Waiting()) continue;
    Placement p;
    p.job_id = j->job_id;
    if (j->one_node ? free.PlacePacked(j->learners, j->per_learner, {}, &p.learner_nodes, true)
                    : free.PlaceMostFree(j->learners, j->per_learner, &p.learner_nodes)) {
      d.placements.push_back(std::move(p));
      continue;
    }
    state_.at(j->job_id).running = false;
    if (snapshot.explain) {
      d.waiting.push_back({j->job_id, WaitCode::kNoRoom,
                           absl::StrCat("waiting: no node set has room for ", j->learners,
                                        " learners (fragmented)")});
    }
  }
  return d;
}

}  // namespace weft::scheduler
