#pragma once

#include "scheduler/policy.h"

namespace weft::scheduler {

// Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for Deep Learning
// Clusters", EuroSys'18) in its "+Oracle" form from the Pollux OSDI'21 artifact: elastic jobs at a
// fixed batch size, sized by marginal gain in remaining time.
//  1. admission: in submission order, every job gets one learner while the cluster has room;
//  2. greedy: repeatedly give one more learner to the job with the largest
//     (T(r) − T(r+1)) × remaining steps, T from JobModel::StepSeconds on a packed placement,
//     up to max_learners, while room is left and some gain is positive (ties: submission order);
//  3. jobs whose learner count is unchanged keep their nodes; the others, fewest learners first,
//     take learners from the most free nodes.
// Jobs without a model (JobRequest::model == nullptr) only get their admission learner.
class OptimusPolicy : public Policy {
 public:
  std::string Name() const override { return "optimus"; }
  Decisions Schedule(const ClusterSnapshot& snapshot) override;
};

}  // namespace weft::scheduler
