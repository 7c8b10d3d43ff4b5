// The controller's scheduling rounds: the cluster view's snapshot goes to the policy, its
// decisions are checked (scheduler/decision_check.h) and applied: preemptions, then starts.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "control/controller.h"
#include "scheduler/decision_check.h"

namespace weft {

void Controller::ScheduleLocked(const std::vector<JobRecord>& jobs) {
  std::map<std::string, int> stopping;
  for (const JobRecord& r : jobs) {
    if (r.state != JobState::kQueued) continue;
    if (int left = executor_.Running(r.id); left > 0) stopping[r.id] = left;
  }
  view_.SetLeaving(attempts_.LeavingNodes());
  ClusterView::Round round = view_.ForRound(jobs, attempts_.not_before(), stopping, clock_.NowMs());
  std::map<std::string, scheduler::Waiting> waiting = round.held;
  const auto& queued = round.snapshot.jobs;
  // A round is due when a job waits, or a running elastic job could grow into idle capacity.
  auto due = [](const scheduler::JobRequest& j) {
    return j.Waiting() || static_cast<int>(j.allocation.size()) < j.max_learners;
  };
  if (std::none_of(queued.begin(), queued.end(), due)) {
    recorder_.Waiting(waiting, jobs);
    view_.SetWaiting(std::move(waiting));
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  scheduler::Decisions d = policy_.Schedule(round.snapshot);
  MetricsRegistry::Global().Observe(
      kRoundMetric, {{"policy", policy_.Name()}},
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // weftd keeps a preempted job's nodes until its learners have checkpointed and exited: a round
  // that assumes otherwise is refused whole. Only elastic jobs are ever resized (the check holds
  // every placement to the job's range).
  absl::Status ok = scheduler::CheckDecisions(
      round.snapshot, d, {round.snapshot.preemption_frees_at_once, /*allow_resize=*/true});
  if (!ok.ok()) {
    std::string refusal = absl::StrCat("policy ", policy_.Name(), " ", ok.message());
    if (refusal != last_refusal_) {
      spdlog::error("scheduling round refused, nothing of it applied: {}", refusal);
    }
    last_refusal_ = refusal;
    for (const auto& j : queued) {
      if (j.Waiting()) {
        waiting[j.job_id] = {
            j.job_id, scheduler::WaitCode::kNextRound,
            absl::StrCat("waiting: weftd refused the scheduler's decision (", refusal, ")")};
      }
    }
    recorder_.Waiting(waiting, jobs);
    view_.SetWaiting(std::move(waiting));
    return;
  }
  last_refusal_.clear();
  for (const scheduler::Waiting& w : d.waiting) waiting[w.job_id] = w;
  recorder_.Waiting(waiting, jobs);
  view_.SetWaiting(std::move(waiting));
  for (const std::string& id : d.preempted) {
    auto why = d.preempt_reasons.find(id);
    PreemptLocked(
        round.jobs.at(id),
        why != d.preempt_reasons.end()
            ? absl::StrCat(why->second, "; checkpointing before it goes back to the queue")
            : absl::StrCat("preempted by the ", policy_.Name(),
                           " policy for a higher-priority job or a tenant below its "
                           "fair share; checkpointing before it goes back to the queue"));
  }
  for (const scheduler::Placement& p : d.placements) {
    const JobRecord& r = round.jobs.at(p.job_id);
    if (r.state == JobState::kQueued) {
      StartJobLocked(r, p);
    } else {
      ResizeLocked(r, p);
    }
  }
}

void Controller::ResizeLocked(const JobRecord& r, const scheduler::Placement& p) {
  const bool grow = p.learner_nodes.size() > r.learners.size();
  // A scale-out parameter-server job's gang lists its servers after its learners.
  if (p.learner_nodes.size() == r.learners.size() + r.servers.size()) return;
  // A gang still starting cannot checkpoint yet: its grow waits for a round after it runs.
  if (grow && r.state != JobState::kRunning) return;
  // An elastic job's learners let newcomers join, and let learners leave, in place.
  if (grow && membership_.Grow(attempts_, r, p)) return;
  if (!grow && membership_.Shrink(attempts_, r, p)) return;
  PreemptLocked(r, absl::StrCat(p.reason.empty() ? (grow ? "grow" : "shrink") : p.reason,
                                "; checkpointing, then it restarts with the learners that fit"));
}

void Controller::PreemptLocked(JobRecord r, const std::string& reason) {
  if (!RunsLearners(r.state)) return;  // PLACED: its learners are being started this round
  absl::Status s = recorder_.Transition(r, JobState::kPreempted, reason);
  if (!s.ok()) {
    spdlog::error("job {}: {}", r.id, s.message());
    return;
  }
  spdlog::info("job {}: preempted, stopping its learners with {} ms to checkpoint", r.id,
               options_.stop_grace_ms);
  executor_.Stop(r.id, options_.stop_grace_ms).IgnoreError();
}

absl::Status Controller::PickAddressesLocked(JobRecord& r,
                                             std::pair<std::string, int>* rendezvous) {
  if (r.learners.size() > 1) {
    auto address = executor_.RendezvousAddress(r.learners[0].node);
    if (!address.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot start the gang: ", address.status().message()));
    }
    *rendezvous = *address;
  }
  for (ServerSlot& server : r.servers) {
    auto address = executor_.RendezvousAddress(server.node);
    if (!address.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot place a parameter server: ", address.status().message()));
    }
    server.address = absl::StrCat(address->first, ":", address->second);
  }
  return absl::OkStatus();
}

absl::Status Controller::StartServersLocked(JobRecord& r, const JobSpec& spec,
                                            const DatasetRecord& data) {
  for (size_t i = 0; i < r.servers.size(); ++i) {
    absl::StatusOr<int64_t> pid =
        executor_.Start(launches_.Server(r, spec, static_cast<int>(i), data));
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

void Controller::StartJobLocked(JobRecord r, const scheduler::Placement& p) {
  if (r.state != JobState::kQueued) return;
  auto spec = specs_.Get(r);
  if (!spec.ok()) return recorder_.Fail(r, std::string(spec.status().message()));
  absl::StatusOr<DatasetRecord> data = launches_.DataSet(r, **spec);
  absl::StatusOr<std::string> image = data.ok() ? launches_.Image(r, **spec) : data.status();
  if (!image.ok()) {
    if (!absl::IsNotFound(image.status())) {
      return spdlog::error("job {}: {}", r.id, image.status().message());  // next round
    }
    return recorder_.Fail(r, std::string(image.status().message()));
  }
  // Elastic: anywhere in its range. A scale-out parameter-server job's servers come last.
  const int servers = (*spec)->ParameterServers();
  const int world = static_cast<int>(p.learner_nodes.size()) - servers;
  r.attempt += 1;
  r.generation = 1;
  r.ClearGang();
  // Learners first over the nodes, then servers: a spread gang of 2 + 2 on two nodes puts a
  // learner and a server on each.
  const std::vector<std::string> members =
      servers > 0 ? InterleaveByNode(p.learner_nodes) : p.learner_nodes;
  for (int i = 0; i < world; ++i) r.learners.push_back({members[i], 0, i});
  for (int i = 0; i < servers; ++i) r.servers.push_back({members[world + i], 0, i, ""});
  r.next_learner_id = static_cast<int>(r.learners.size());
  if (absl::Status s = recorder_.Transition(r, JobState::kPlaced, PlacedReason(r)); !s.ok()) {
    return spdlog::error("job {}: {}", r.id, s.message());
  }
  std::pair<std::string, int> rendezvous;
  if (absl::Status s = PickAddressesLocked(r, &rendezvous); !s.ok()) {
    r.ClearGang();
    return RestartOrFailLocked(r, std::string(s.message()));
  }
  const int one = launches_.LearnersAsOne(r, **spec);
  std::string starting = StartingReason(r, one > 1 ? std::pair<std::string, int>() : rendezvous);
  if (one > 1) {
    const JobSpec as_one = (*spec)->AsOneLearner(one);
    absl::StrAppend(&starting, "; all ", one, " on node ", r.learners[0].node,
                    ", so rank 0 trains for the gang as one learner (", as_one.EffectiveThreads(),
                    " threads, batch ", as_one.training.batch_size,
                    ": on one host as fast as a gang or faster) and the others stand by "
                    "(resources.gang_on_one_host: learners keeps a gang)");
  }
  if (absl::Status s = recorder_.Transition(r, JobState::kStarting, starting); !s.ok()) {
    return spdlog::error("job {}: {}", r.id, s.message());
  }
  attempts_.EndAttempt(r.id);
  // No learner of the job runs now (a queued job waits for the last one of its previous attempt).
  RemoveUncommittedCheckpointsLocked(r.id);
  AttemptTracker::Attempt& attempt = attempts_.Of(r.id);
  attempt.generation = r.generation;
  absl::Status started = StartServersLocked(r, **spec, *data);
  for (int rank = 0; started.ok() && rank < world; ++rank) {
    LearnerLaunch launch = launches_.Learner(r, **spec, rank, rendezvous, *data);
    launch.image = *image;
    absl::StatusOr<int64_t> pid = executor_.Start(launch);
    if (!pid.ok()) {
      started = absl::Status(pid.status().code(), absl::StrCat("cannot start learner rank ", rank,
                                                               ": ", pid.status().message()));
      break;
    }
    r.learners[rank].pid = *pid;
    attempt.last_seen_ms[rank] = clock_.NowMs();
  }
  if (!started.ok()) {
    // All or nothing: a gang missing a learner or a server cannot train.
    executor_.Stop(r.id, 0).IgnoreError();
    r.ClearGang();
    attempts_.EndAttempt(r.id);
    return recorder_.Fail(r, std::string(started.message()));
  }
  absl::Status s = store_.UpdateJob(r);
  if (!s.ok()) spdlog::error("job {}: cannot record learner pids: {}", r.id, s.message());
}

}  // namespace weft
