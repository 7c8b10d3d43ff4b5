#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/policy.h"

namespace weft::scheduler {

namespace {
std::string FormatCpus(double c) { return absl::StrFormat("%g", c); }
}  // namespace

absl::Status CheckFeasible(const JobRequest& request, const std::vector<Node>& nodes) {
  if (nodes.empty()) return absl::FailedPreconditionError("the cluster has no nodes");
  Resources largest;
  int fitting_slots = 0;
  for (const Node& n : nodes) {
    largest.cpus = std::max(largest.cpus, n.capacity.cpus);
    largest.memory_mb = std::max(largest.memory_mb, n.capacity.memory_mb);
    largest.gpus = std::max(largest.gpus, n.capacity.gpus);
    // How many learners this node could hold when empty.
    Resources cap = n.capacity;
    int slots = 0;
    while (cap.Fits(request.per_learner) && slots < request.learners) {
      cap -= request.per_learner;
      ++slots;
      if (request.per_learner.cpus <= 0 && request.per_learner.memory_mb <= 0 &&
          request.per_learner.gpus <= 0) {
        slots = request.learners;
        break;
      }
    }
    fitting_slots += slots;
  }
  const Resources& r = request.per_learner;
  if (r.cpus > largest.cpus + 1e-9) {
    return absl::FailedPreconditionError(absl::StrCat("never fits: needs ", FormatCpus(r.cpus),
                                                      " cpus per learner, the largest node has ",
                                                      FormatCpus(largest.cpus)));
  }
  if (r.memory_mb > largest.memory_mb) {
    return absl::FailedPreconditionError(
        absl::StrCat("never fits: needs ", r.memory_mb,
                     " MiB memory per learner, the largest node has ", largest.memory_mb, " MiB"));
  }
  if (r.gpus > largest.gpus) {
    return absl::FailedPreconditionError(absl::StrCat(
        "never fits: needs ", r.gpus, " gpus per learner, the largest node has ", largest.gpus));
  }
  if (fitting_slots < request.learners) {
    return absl::FailedPreconditionError(absl::StrCat(
        "never fits: ", request.learners, " learners × ", FormatCpus(r.cpus), " cpus, ",
        r.memory_mb, " MiB need more than the whole cluster (room for ", fitting_slots, ")"));
  }
  return absl::OkStatus();
}

bool PlaceGang(const JobRequest& request, std::vector<Node>& nodes, Placement* placement) {
  std::vector<Node> trial = nodes;
  Placement p;
  p.job_id = request.job_id;
  for (int rank = 0; rank < request.learners; ++rank) {
    bool placed = false;
    for (Node& n : trial) {
      if (n.Free().Fits(request.per_learner)) {
        n.allocated += request.per_learner;
        p.learner_nodes.push_back(n.name);
        placed = true;
        break;
      }
    }
    if (!placed) return false;
  }
  nodes = std::move(trial);
  *placement = std::move(p);
  return true;
}

Decisions FifoPolicy::Schedule(const ClusterSnapshot& snapshot) {
  Decisions d;
  std::vector<Node> nodes = snapshot.nodes;
  const JobRequest* head = nullptr;  // the first waiting job that did not fit
  for (const JobRequest& job : snapshot.jobs) {
    if (!job.Waiting()) continue;
    if (head != nullptr) {
      if (!snapshot.explain) break;
      d.waiting.push_back(
          {job.job_id, WaitCode::kBehindHead,
           absl::StrCat("waiting: behind ", NameFor(job, *head), " (first in, first out)")});
      continue;
    }
    Placement p;
    if (PlaceGang(job, nodes, &p)) {
      d.placements.push_back(std::move(p));
      continue;
    }
    head = &job;
    if (snapshot.explain)
      d.waiting.push_back(
          {job.job_id, WaitCode::kNoRoom,
           absl::StrCat("waiting: no free node has ", FormatCpus(job.per_learner.cpus), " cpus",
                        job.per_learner.gpus > 0
                            ? absl::StrCat(", ", job.per_learner.gpus, " free gpus")
                            : std::string(),
                        " and ", job.per_learner.memory_mb, " MiB for ", job.learners,
                        job.learners == 1 ? " learner" : " learners")});
  }
  return d;
}

}  // namespace weft::scheduler
