#include "scheduler/decision_check.h"

#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace weft::scheduler {
namespace {

absl::Status Refuse(const std::string& what) { return absl::FailedPreconditionError(what); }

// The resource of `n` that is over capacity, as "cpus 3/2", or "".
std::string Overrun(const Node& n) {
  const Resources& a = n.allocated;
  const Resources& c = n.capacity;
  if (a.cpus > c.cpus + 1e-9) return absl::StrFormat("cpus %g/%g", a.cpus, c.cpus);
  if (a.memory_mb > c.memory_mb)
    return absl::StrCat("memory ", a.memory_mb, "/", c.memory_mb, " MiB");
  if (a.gpus > c.gpus) return absl::StrCat("gpus ", a.gpus, "/", c.gpus);
  return "";
}

}  // namespace

absl::Status CheckDecisions(const ClusterSnapshot& snapshot, const Decisions& decisions,
                            const DecisionCheckOptions& options) {
  std::unordered_map<std::string, const JobRequest*> jobs;
  for (const JobRequest& j : snapshot.jobs) jobs.emplace(j.job_id, &j);
  std::unordered_map<std::string, int> node_index;
  std::vector<Node> nodes = snapshot.nodes;
  for (size_t n = 0; n < nodes.size(); ++n) node_index.emplace(nodes[n].name, static_cast<int>(n));
  auto release = [&](const JobRequest& j) {
    for (const std::string& name : j.allocation) {
      auto it = node_index.find(name);
      if (it != node_index.end()) nodes[it->second].allocated -= j.per_learner;
    }
  };

  std::set<std::string> preempted;
  for (const std::string& id : decisions.preempted) {
    auto it = jobs.find(id);
    if (it == jobs.end()) return Refuse(absl::StrCat("preempts unknown job ", id));
    if (it->second->Waiting())
      return Refuse(absl::StrCat("preempts job ", id, ", which is waiting"));
    if (!preempted.insert(id).second) return Refuse(absl::StrCat("preempts job ", id, " twice"));
    if (options.preemption_frees_at_once) release(*it->second);
  }
  std::set<std::string> placed;
  std::set<int> touched;  // nodes this round adds learners to
  for (const Placement& p : decisions.placements) {
    auto it = jobs.find(p.job_id);
    if (it == jobs.end()) return Refuse(absl::StrCat("places unknown job ", p.job_id));
    const JobRequest& j = *it->second;
    if (!placed.insert(p.job_id).second)
      return Refuse(absl::StrCat("places job ", p.job_id, " twice"));
    if (preempted.count(p.job_id)) {
      return Refuse(absl::StrCat("both places and preempts job ", p.job_id));
    }
    if (!j.Waiting() && !options.allow_resize) {
      return Refuse(absl::StrCat("resizes running job ", p.job_id,
                                 ", and running jobs cannot be resized here"));
    }
    const int count = static_cast<int>(p.learner_nodes.size());
    if (count != j.learners && (count < j.min_learners || count > j.max_learners)) {
      return Refuse(absl::StrCat("gives job ", p.job_id, " ", count, " learners; it asks for ",
                                 j.learners, " (", j.min_learners, " to ", j.max_learners, ")"));
    }
    if (!j.Waiting()) release(j);
    for (const std::string& name : p.learner_nodes) {
      auto n = node_index.find(name);
      if (n == node_index.end()) {
        return Refuse(absl::StrCat("places job ", p.job_id, " on unknown node '", name, "'"));
      }
      nodes[n->second].allocated += j.per_learner;
      touched.insert(n->second);
    }
  }
  for (int i : touched) {
    if (std::string over = Overrun(nodes[i]); !over.empty()) {
      return Refuse(absl::StrCat("over-commits node ", nodes[i].name, ": ", over));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
