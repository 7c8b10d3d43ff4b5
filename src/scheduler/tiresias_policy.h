#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/policy.h"

namespace weft::scheduler {

// Tiresias, discretised two-dimensional least-attained-service (2D-LAS) with two queues
// (Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI'19), as in
// the Tiresias simulator and the Pollux OSDI'21 artifact:
//  - new jobs join the end of queue 0; a job moves to the end of queue 1 once its executed time
//    × requested learners reaches `queue_threshold_s` (57,600 learner-seconds = 16 GPU-hours);
//  - each round scans queue 0 then queue 1 in insertion order; a job runs if its whole gang fits
//    in what the cluster has left (fragmentation ignored), otherwise it is preempted or waits;
//    smaller jobs behind it may still start;
//  - running jobs keep their nodes (no migration); newly started ones take learners from the node
//    with the most free slots, repeatedly.
// Jobs are rigid: always `learners` learners. Starvation promotion is off, as in the artifact.
// Stateful (the queues); executed time counts every round a job was running, including restore.
class TiresiasPolicy : public Policy {
 public:
  explicit TiresiasPolicy(double queue_threshold_s = 57600) : threshold_s_(queue_threshold_s) {}
  std::string Name() const override { return "tiresias"; }
  Decisions Schedule(const ClusterSnapshot& snapshot) override;

 private:
  struct State {
    std::string job_id;
    bool running = false;
    TimeMs last_check_ms = 0;
    double executed_s = 0;
    int queue = 0;
    const JobRequest* job = nullptr;  // this round's request; null once the job is gone
  };
  // Attaches this round's jobs, forgets finished ones, accounts executed time and demotes.
  void UpdateQueues(const ClusterSnapshot& snapshot);
  // The jobs that run this round, in queue order; the others are preempted or wait.
  std::vector<const JobRequest*> PickRunning(const ClusterSnapshot& snapshot, Decisions* d);

  double threshold_s_;
  // Queues hold pointers into state_ (node-based map: pointers stay valid).
  std::vector<State*> queue0_, queue1_;
  std::unordered_map<std::string, State> state_;
};

}  // namespace weft::scheduler
