// An Executor that starts no process: it records launches and stops, and reports the exits a
// test (or a fuzz target) makes up. For driving the controller step by step.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "executor/executor.h"

namespace weft {

class FakeExecutor : public Executor {
 public:
  absl::StatusOr<int64_t> Start(const LearnerLaunch& l) override {
    launches.push_back(l);
    running[l.job_id].insert(l.rank);
    return 4242 + l.rank;
  }
  absl::Status Stop(const std::string& job_id, int64_t grace_ms) override {
    stopped.push_back(job_id);
    if (grace_ms <= 0) running.erase(job_id);
    return absl::OkStatus();
  }
  absl::Status Kill(const std::string& job_id, int rank) override {
    if (!running.count(job_id) || !running[job_id].count(rank)) {
      return absl::NotFoundError("no such learner");
    }
    killed.emplace_back(job_id, rank);
    return absl::OkStatus();
  }
  std::vector<LearnerExit> Reap() override {
    std::vector<LearnerExit> out;
    out.swap(exits);
    for (const auto& e : out) {
      running[e.job_id].erase(e.rank);
      if (running[e.job_id].empty()) running.erase(e.job_id);
    }
    return out;
  }
  int Running(const std::string& job_id) override {
    auto it = running.find(job_id);
    return it == running.end() ? 0 : static_cast<int>(it->second.size());
  }
  absl::StatusOr<std::pair<std::string, int>> RendezvousAddress(const std::string&) override {
    return std::make_pair(std::string("127.0.0.1"), 29400);
  }
  absl::Status Adopt(const LearnerLaunch& l, int64_t pid) override {
    if (!adoptable.count(pid)) return absl::NotFoundError("no such learner");
    adopted.push_back(l);
    running[l.job_id].insert(l.rank);
    return absl::OkStatus();
  }
  bool TrainsGangsAsOneLearner() const override { return as_one; }
  bool ChoosesGpus() const override { return chooses_gpus; }
  bool as_one = false;          // what TrainsGangsAsOneLearner() says
  bool chooses_gpus = false;    // what ChoosesGpus() says
  std::set<int64_t> adoptable;  // pids Adopt() accepts
  std::vector<LearnerLaunch> adopted;

  void Exit(const std::string& job, int64_t attempt, int code, int signal = 0, int rank = 0) {
    LearnerExit e;
    e.job_id = job;
    e.attempt = attempt;
    e.rank = rank;
    e.exit_code = code;
    e.signal = signal;
    exits.push_back(e);
  }

  std::vector<LearnerLaunch> launches;
  std::vector<std::string> stopped;
  std::vector<std::pair<std::string, int>> killed;  // (job, rank) asked to be killed
  std::vector<LearnerExit> exits;
  std::map<std::string, std::set<int>> running;  // ranks not yet exited, by job
};

}  // namespace weft
