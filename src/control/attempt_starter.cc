// AttemptStarter: a job's next attempt started on the nodes a round placed it on
// (control/attempt_starter.h).
#include "control/attempt_starter.h"

#include <algorithm>
#include <deque>
#include <map>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"

namespace weft {

absl::Status AttemptStarter::PickAddresses(JobRecord& r, std::pair<std::string, int>* rendezvous) {
  if (r.learners.size() > 1) {
    auto address = c_.executor.RendezvousAddress(r.learners[0].node);
    if (!address.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot start the gang: ", address.status().message()));
    }
    *rendezvous = *address;
  }
  for (ServerSlot& server : r.servers) {
    auto address = c_.executor.RendezvousAddress(server.node);
    if (!address.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot place a parameter server: ", address.status().message()));
    }
    server.address = absl::StrCat(address->first, ":", address->second);
  }
  return absl::OkStatus();
}

absl::Status AttemptStarter::StartServers(JobRecord& r, const JobSpec& spec,
                                          const DatasetRecord& data) {
  for (size_t i = 0; i < r.servers.size(); ++i) {
    absl::StatusOr<int64_t> pid =
        c_.executor.Start(c_.launches.Server(r, spec, static_cast<int>(i), data));
    if (!pid.ok()) {
      return absl::Status(pid.status().code(), absl::StrCat("cannot start parameter server ", i,
                                                            ": ", pid.status().message()));
    }
    r.servers[i].pid = *pid;
  }
  return absl::OkStatus();
}

namespace {

// The gang's nodes one of each in turn ([a, a, b, b] -> [a, b, a, b]), in order of first
// appearance.
std::vector<std::string> InterleaveByNode(const std::vector<std::string>& nodes) {
  std::vector<std::pair<std::string, int>> counts;  // node, members there
  for (const std::string& n : nodes) {
    auto it =
        std::find_if(counts.begin(), counts.end(), [&n](const auto& c) { return c.first == n; });
    if (it == counts.end()) {
      counts.push_back({n, 1});
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> out;
  while (out.size() < nodes.size()) {
    for (auto& [node, left] : counts) {
      if (left-- > 0) out.push_back(node);
    }
  }
  return out;
}

// The first `world` of `members` (nodes) as the learners of a new attempt placed at `now` (unix
// ms), ids 0, 1, …, each with the GPU devices `p` gave a learner on its node.
std::vector<LearnerSlot> LearnerSlots(const std::vector<std::string>& members, int world,
                                      const scheduler::Placement& p, TimeMs now) {
  std::map<std::string, std::deque<std::vector<int>>> gpus;
  for (size_t i = 0; i < p.learner_gpus.size() && i < p.learner_nodes.size(); ++i) {
    gpus[p.learner_nodes[i]].push_back(p.learner_gpus[i]);
  }
  std::vector<LearnerSlot> out;
  for (int i = 0; i < world; ++i) {
    out.push_back({members[i], 0, i, {}, now});
    std::deque<std::vector<int>>& on_node = gpus[members[i]];
    if (!on_node.empty()) {
      out.back().gpus = std::move(on_node.front());
      on_node.pop_front();
    }
  }
  return out;
}

// "a" / "node a" / "nodes a, b, b" for the nodes of `slots`.
template <typename Slot>
std::string NodesOf(const std::vector<Slot>& slots) {
  std::vector<std::string> nodes, distinct;
  for (const Slot& l : slots) {
    nodes.push_back(l.node);
    if (std::find(distinct.begin(), distinct.end(), l.node) == distinct.end()) {
      distinct.push_back(l.node);
    }
  }
  return absl::StrCat(distinct.size() == 1 ? "node " : "nodes ",
                      absl::StrJoin(distinct.size() == 1 ? distinct : nodes, ", "));
}

// "placed on node a" / "placed 2 learners on node a" / "placed 3 learners on nodes a, b, b",
// then "; 2 parameter servers on nodes a, b" for a scale-out parameter-server job.
std::string PlacedReason(const JobRecord& r) {
  std::string reason = r.learners.size() == 1 ? absl::StrCat("placed on node ", r.learners[0].node)
                                              : absl::StrCat("placed ", r.learners.size(),
                                                             " learners on ", NodesOf(r.learners));
  if (!r.servers.empty()) {
    absl::StrAppend(&reason, "; ", r.servers.size(), " parameter servers on ", NodesOf(r.servers));
  }
  return reason;
}

// "starting learner, attempt 2" / "starting 2 learners, attempt 2, rendezvous at h:p" (without
// the rendezvous when none is given: a gang that trains as one learner) /
// "starting 2 learners, attempt 2, parameter servers at h:p, h:q".
std::string StartingReason(const JobRecord& r, const std::pair<std::string, int>& rendezvous) {
  const size_t world = r.learners.size();
  if (!r.servers.empty()) {
    std::vector<std::string> addresses;
    for (const ServerSlot& s : r.servers) addresses.push_back(s.address);
    return absl::StrCat("starting ", world, world == 1 ? " learner" : " learners", ", attempt ",
                        r.attempt, ", parameter servers at ", absl::StrJoin(addresses, ", "));
  }
  if (world == 1) return absl::StrCat("starting learner, attempt ", r.attempt);
  if (rendezvous.first.empty()) {
    return absl::StrCat("starting ", world, " learners, attempt ", r.attempt);
  }
  return absl::StrCat("starting ", world, " learners, attempt ", r.attempt, ", rendezvous at ",
                      rendezvous.first, ":", rendezvous.second);
}

}  // namespace

void AttemptStarter::Start(AttemptTracker& attempts, JobRecord r, const scheduler::Placement& p) {
  if (r.state != JobState::kQueued) return;
  auto spec = c_.specs.Get(r);
  if (!spec.ok()) return c_.recorder.Fail(r, std::string(spec.status().message()));
  absl::StatusOr<DatasetRecord> data = c_.launches.DataSet(r, **spec);
  absl::StatusOr<std::string> image = data.ok() ? c_.launches.Image(r, **spec) : data.status();
  if (!image.ok()) {
    if (!absl::IsNotFound(image.status())) {
      return spdlog::error("job {}: {}", r.id, image.status().message());  // next round
    }
    return c_.recorder.Fail(r, std::string(image.status().message()));
  }
  // Elastic: anywhere in its range. A scale-out parameter-server job's servers come last.
  const int servers = (*spec)->ParameterServers();
  const int world = static_cast<int>(p.learner_nodes.size()) - servers;
  r.attempt += 1;
  r.generation = 1;
  r.ClearGang(c_.clock.NowMs());
  // Learners first over the nodes, then servers: a spread gang of 2 + 2 on two nodes puts a
  // learner and a server on each.
  const std::vector<std::string> members =
      servers > 0 ? InterleaveByNode(p.learner_nodes) : p.learner_nodes;
  r.learners = LearnerSlots(members, world, p, c_.clock.NowMs());
  for (int i = 0; i < servers; ++i) r.servers.push_back({members[world + i], 0, i, ""});
  r.next_learner_id = static_cast<int>(r.learners.size());
  if (absl::Status s = c_.recorder.Transition(r, JobState::kPlaced, PlacedReason(r)); !s.ok()) {
    return spdlog::error("job {}: {}", r.id, s.message());
  }
  std::pair<std::string, int> rendezvous;
  if (absl::Status s = PickAddresses(r, &rendezvous); !s.ok()) {
    r.ClearGang(c_.clock.NowMs());
    return exits_.RestartOrFail(attempts, r, std::string(s.message()));
  }
  const int one = c_.launches.LearnersAsOne(r, **spec);
  std::string starting = StartingReason(r, one > 1 ? std::pair<std::string, int>() : rendezvous);
  if (one > 1) {
    const JobSpec as_one = (*spec)->AsOneLearner(one);
    absl::StrAppend(&starting, "; all ", one, " on node ", r.learners[0].node,
                    ", so rank 0 trains for the gang as one learner (", as_one.EffectiveThreads(),
                    " threads, batch ", as_one.training.batch_size,
                    ": on one host as fast as a gang or faster) and the others stand by "
                    "(resources.gang_on_one_host: learners keeps a gang)");
  }
  if (absl::Status s = c_.recorder.Transition(r, JobState::kStarting, starting); !s.ok()) {
    return spdlog::error("job {}: {}", r.id, s.message());
  }
  attempts.EndAttempt(r.id);
  // No learner of the job runs now (a queued job waits for the last one of its previous attempt).
  RemoveUncommittedCheckpoints(r.id);
  AttemptTracker::Attempt& attempt = attempts.Of(r.id);
  attempt.generation = r.generation;
  absl::Status started = StartServers(r, **spec, *data);
  for (int rank = 0; started.ok() && rank < world; ++rank) {
    LearnerLaunch launch = c_.launches.Learner(r, **spec, rank, rendezvous, *data);
    launch.image = *image;
    absl::StatusOr<int64_t> pid = c_.executor.Start(launch);
    if (!pid.ok()) {
      started = absl::Status(pid.status().code(), absl::StrCat("cannot start learner rank ", rank,
                                                               ": ", pid.status().message()));
      break;
    }
    r.learners[rank].pid = *pid;
    attempt.last_seen_ms[rank] = c_.clock.NowMs();
  }
  if (!started.ok()) {
    // All or nothing: a gang missing a learner or a server cannot train.
    c_.executor.Stop(r.id, 0).IgnoreError();
    r.ClearGang(c_.clock.NowMs());
    attempts.EndAttempt(r.id);
    return c_.recorder.Fail(r, std::string(started.message()));
  }
  absl::Status s = c_.store.UpdateJob(r);
  if (!s.ok()) spdlog::error("job {}: cannot record learner pids: {}", r.id, s.message());
}

void AttemptStarter::RemoveUncommittedCheckpoints(const std::string& id) {
  const std::string dir = c_.layout.CheckpointDir(id);
  absl::StatusOr<std::vector<std::string>> names = c_.env.ListFiles(dir);
  absl::StatusOr<std::vector<CheckpointRecord>> committed = c_.store.Checkpoints(id);
  if (!names.ok() || !committed.ok()) {
    // Harmless to skip: a new attempt resumes only from committed checkpoints.
    const absl::Status& s = names.ok() ? committed.status() : names.status();
    return spdlog::warn("job {}: cannot look for uncommitted checkpoints: {}", id, s.message());
  }
  absl::flat_hash_set<std::string> keep;
  for (const CheckpointRecord& c : *committed) keep.insert(c.path);
  for (const std::string& name : *names) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (keep.contains(path)) continue;
    if (absl::Status s = c_.env.RemoveFile(path); !s.ok()) {
      spdlog::warn("job {}: {}", id, s.message());
    } else {
      spdlog::info("job {}: removed {}, never committed", id, path);
    }
  }
}

}  // namespace weft
