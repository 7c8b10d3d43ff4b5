#include "scheduler/tiresias_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/placement.h"

namespace weft::scheduler {

Decisions TiresiasPolicy::Schedule(const ClusterSnapshot& snapshot) {
  std::unordered_map<std::string, const JobRequest*> active;
  active.reserve(snapshot.jobs.size());
  for (const JobRequest& j : snapshot.jobs) active.emplace(j.job_id, &j);

  // Forget finished jobs; new jobs join the end of queue 0.
  auto drop_gone = [&](std::vector<std::string>& q) {
    q.erase(std::remove_if(q.begin(), q.end(), [&](const std::string& id) { return !active.count(id); }),
            q.end());
  };
  drop_gone(queue0_);
  drop_gone(queue1_);
  for (auto it = state_.begin(); it != state_.end();) {
    it = active.count(it->first) ? std::next(it) : state_.erase(it);
  }
  for (const JobRequest& j : snapshot.jobs) {
    if (state_.emplace(j.job_id, State{}).second) queue0_.push_back(j.job_id);
  }

  // Account executed time; demote jobs past the threshold.
  for (const JobRequest& j : snapshot.jobs) {
    State& st = state_[j.job_id];
    if (st.running) {
      st.executed_s += (snapshot.now_ms - st.last_check_ms) / 1000.0;
      if (st.queue == 0 && st.executed_s * j.learners >= threshold_s_) {
        queue0_.erase(std::find(queue0_.begin(), queue0_.end(), j.job_id));
        queue1_.push_back(j.job_id);
        st.queue = 1;
      }
    }
    st.last_check_ms = snapshot.now_ms;
  }

  // Which jobs run: whole gangs against the cluster's total, in queue order.
  Resources left;
  for (const Node& n : snapshot.nodes) left += n.capacity;
  Decisions d;
  std::vector<const JobRequest*> run_order;
  for (const auto* q : {&queue0_, &queue1_}) {
    for (const std::string& id : *q) {
      const JobRequest& j = *active[id];
      State& st = state_[id];
      Resources gang;
      for (int k = 0; k < j.learners; ++k) gang += j.per_learner;
      if (left.Fits(gang)) {
        left -= gang;
        st.running = true;
        run_order.push_back(&j);
      } else {
        st.running = false;
        if (!j.Waiting()) d.preempted.push_back(id);
        d.waiting.push_back({id, absl::StrCat("waiting: ", j.learners, " learners do not fit in what "
                                              "queue ", st.queue, " jobs ahead of it leave")});
      }
    }
  }

  // Running jobs keep their nodes; new ones take the most free nodes.
  FreeMap free(snapshot.nodes);
  for (const JobRequest* j : run_order) {
    if (!j->Waiting()) free.Take(*j);
  }
  for (const JobRequest* j : run_order) {
    if (!j->Waiting()) continue;
    Placement p;
    p.job_id = j->job_id;
    if (free.PlaceMostFree(j->learners, j->per_learner, &p.learner_nodes)) {
      d.placements.push_back(std::move(p));
    } else {
      state_[j->job_id].running = false;
      d.waiting.push_back({j->job_id, absl::StrCat("waiting: no node set has room for ", j->learners,
                                                   " learners (fragmented)")});
    }
  }
  return d;
}

}  // namespace weft::scheduler
