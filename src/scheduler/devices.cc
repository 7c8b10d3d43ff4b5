// AssignGpus and CheckGpus (scheduler/devices.h).
#include "scheduler/devices.h"

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::scheduler {
namespace {

using GpuList = std::vector<int>;

// What a placement does to the devices its job holds: the lists its learners keep (by position
// in learner_nodes; nullopt for a learner that is new there) and the ones it gives up.
struct Kept {
  std::vector<std::optional<GpuList>> at;
  std::vector<std::pair<std::string, GpuList>> given_up;  // (node, devices)
};

// The devices learner i of `job` holds (none when the caller tracks no devices).
const GpuList& HeldBy(const JobRequest& job, size_t i) {
  static const GpuList kNone;
  return i < job.allocation_gpus.size() ? job.allocation_gpus[i] : kNone;
}

Kept KeptBy(const JobRequest& job, const Placement& p) {
  std::map<std::string, std::deque<GpuList>> current;
  for (size_t i = 0; i < job.allocation.size(); ++i) {
    current[job.allocation[i]].push_back(HeldBy(job, i));
  }
  Kept k;
  for (const std::string& node : p.learner_nodes) {
    auto it = current.find(node);
    if (it == current.end() || it->second.empty()) {
      k.at.emplace_back(std::nullopt);
      continue;
    }
    k.at.emplace_back(std::move(it->second.front()));
    it->second.pop_front();
  }
  for (auto& [node, lists] : current) {
    for (GpuList& l : lists) {
      if (!l.empty()) k.given_up.emplace_back(node, std::move(l));
    }
  }
  return k;
}

std::unordered_map<std::string, const JobRequest*> JobsById(const ClusterSnapshot& s) {
  std::unordered_map<std::string, const JobRequest*> out;
  for (const JobRequest& j : s.jobs) out[j.job_id] = &j;
  return out;
}

// The devices held on each node after the decisions free what they free (preempted jobs' and
// what resized jobs give up, when preemption frees at once; nothing otherwise): node -> indices.
std::map<std::string, std::set<int>> HeldAfterFreeing(
    const ClusterSnapshot& s, const Decisions& d,
    const std::unordered_map<std::string, const JobRequest*>& jobs) {
  std::map<std::string, std::set<int>> held;
  for (const Node& n : s.nodes) held[n.name].insert(n.gpus_held.begin(), n.gpus_held.end());
  if (!s.preemption_frees_at_once) return held;
  auto release = [&](const std::string& node, const GpuList& gpus) {
    for (int g : gpus) held[node].erase(g);
  };
  for (const std::string& id : d.preempted) {
    auto it = jobs.find(id);
    if (it == jobs.end()) continue;
    for (size_t i = 0; i < it->second->allocation.size(); ++i) {
      release(it->second->allocation[i], HeldBy(*it->second, i));
    }
  }
  for (const Placement& p : d.placements) {
    auto it = jobs.find(p.job_id);
    if (it == jobs.end()) continue;
    for (const auto& [node, gpus] : KeptBy(*it->second, p).given_up) release(node, gpus);
  }
  return held;
}

}  // namespace

absl::Status AssignGpus(const ClusterSnapshot& snapshot, Decisions* decisions) {
  const auto jobs = JobsById(snapshot);
  std::map<std::string, std::set<int>> held = HeldAfterFreeing(snapshot, *decisions, jobs);
  std::map<std::string, std::set<int>> free;
  for (const Node& n : snapshot.nodes) {
    for (const GpuDevice& g : n.gpu_devices) {
      if (!held[n.name].count(g.index)) free[n.name].insert(g.index);
    }
  }
  // Kept devices first, so that a placement listed earlier never takes what a later one keeps.
  std::vector<Kept> kept;
  for (const Placement& p : decisions->placements) {
    auto it = jobs.find(p.job_id);
    kept.push_back(it == jobs.end() ? Kept{} : KeptBy(*it->second, p));
  }
  for (size_t k = 0; k < decisions->placements.size(); ++k) {
    const Placement& p = decisions->placements[k];
    for (size_t i = 0; i < p.learner_nodes.size(); ++i) {
      if (i < kept[k].at.size() && kept[k].at[i]) {
        for (int g : *kept[k].at[i]) free[p.learner_nodes[i]].erase(g);
      }
    }
  }
  for (size_t k = 0; k < decisions->placements.size(); ++k) {
    Placement& p = decisions->placements[k];
    auto it = jobs.find(p.job_id);
    const int per = it == jobs.end() ? 0 : it->second->per_learner.gpus;
    p.learner_gpus.assign(p.learner_nodes.size(), {});
    for (size_t i = 0; i < p.learner_nodes.size(); ++i) {
      const std::string& node = p.learner_nodes[i];
      if (i < kept[k].at.size() && kept[k].at[i]) {
        p.learner_gpus[i] = *kept[k].at[i];
        continue;
      }
      std::set<int>& left = free[node];
      if (static_cast<int>(left.size()) < per) {
        return absl::FailedPreconditionError(
            absl::StrCat("node ", node, " has ", left.size(), " free GPUs, job ", p.job_id,
                         " was given a learner of ", per, " there"));
      }
      for (int n = 0; n < per; ++n) {
        p.learner_gpus[i].push_back(*left.begin());
        left.erase(left.begin());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGpus(const ClusterSnapshot& snapshot, const Decisions& decisions) {
  const auto jobs = JobsById(snapshot);
  std::map<std::string, std::set<int>> held = HeldAfterFreeing(snapshot, decisions, jobs);
  std::map<std::string, std::set<int>> devices;
  for (const Node& n : snapshot.nodes) {
    for (const GpuDevice& g : n.gpu_devices) devices[n.name].insert(g.index);
  }
  for (const Placement& p : decisions.placements) {
    auto it = jobs.find(p.job_id);
    if (it == jobs.end()) continue;
    const Kept kept = KeptBy(*it->second, p);
    const int per = it->second->per_learner.gpus;
    if (p.learner_gpus.size() != p.learner_nodes.size()) {
      return absl::FailedPreconditionError(absl::StrCat("job ", p.job_id, ": devices for ",
                                                        p.learner_gpus.size(), " of its ",
                                                        p.learner_nodes.size(), " learners"));
    }
    for (size_t i = 0; i < p.learner_nodes.size(); ++i) {
      const std::string& node = p.learner_nodes[i];
      const GpuList& gpus = p.learner_gpus[i];
      if (kept.at[i]) {
        if (gpus != *kept.at[i]) {
          return absl::FailedPreconditionError(absl::StrCat(
              "job ", p.job_id, ": learner ", i, " on ", node, " kept its place but not its GPUs"));
        }
        continue;  // held already, and counted in `held`
      }
      if (static_cast<int>(gpus.size()) != per) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", p.job_id, ": learner ", i, " has ", gpus.size(), " GPUs, not ", per));
      }
      for (int g : gpus) {
        if (!devices[node].count(g)) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", p.job_id, ": node ", node, " has no GPU ", g));
        }
        if (!held[node].insert(g).second) {
          return absl::FailedPreconditionError(absl::StrCat(
              "GPU ", g, " of node ", node, " given to job ", p.job_id, " is held already"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
