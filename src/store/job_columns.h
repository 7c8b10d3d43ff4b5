// Column encodings shared by the stores (internal to store/): the jobs table's columns, a job's
// learners, the states that are not settled, and a data set's tenants — the same in both
// schemas; and the errors both give alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "job/job.h"

namespace weft::store_columns {

// CreateWebhook's answer at the cap.
inline absl::Status TooManyWebhooks(const std::string& tenant, int64_t has) {
  return absl::FailedPreconditionError(absl::StrCat("tenant '", tenant, "' has ", has,
                                                    " webhooks, as many as weftd allows; delete "
                                                    "one first"));
}

inline constexpr char kJobColumns[] =
    "id, tenant, name, state, reason, manifest, spec_json, created_ms, updated_ms, attempt, "
    "node, learner_pid, epoch, epochs_total, step, steps_total, samples, best_test_accuracy, "
    "deliver_met_ms, complete_met_ms, restarts, learners, generation, next_learner_id, "
    "experiment, trial, gpu_ms, learner_ms";

// The learners column: the gang's learners by rank ({"node", "pid", "id"}, and "gpus" with
// "since_ms" for a learner that holds devices), then its parameter servers (marked "server").
inline std::string LearnersJson(const std::vector<LearnerSlot>& learners,
                                const std::vector<ServerSlot>& servers) {
  nlohmann::json j = nlohmann::json::array();
  for (const LearnerSlot& l : learners) {
    nlohmann::json slot = {{"node", l.node}, {"pid", l.pid}, {"id", l.id}};
    if (!l.gpus.empty()) slot["gpus"] = l.gpus;
    if (l.since_ms != 0) slot["since_ms"] = l.since_ms;
    j.push_back(std::move(slot));
  }
  for (const ServerSlot& s : servers) {
    j.push_back({{"node", s.node},
                 {"pid", s.pid},
                 {"index", s.index},
                 {"address", s.address},
                 {"server", true}});
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The learners column read back; a row without one (SQLite's version 3) has rank 0 in
// node / learner_pid. A learner without an id (written before generations) has its rank.
inline std::vector<LearnerSlot> ParseLearners(const std::string& text, const std::string& node,
                                              int64_t pid) {
  std::vector<LearnerSlot> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) {
    for (const auto& l : j) {
      if (!l.is_object() || l.value("server", false)) continue;
      const int rank = static_cast<int>(out.size());
      LearnerSlot slot{l.value("node", std::string()),
                       l.value("pid", int64_t{0}),
                       l.value("id", rank),
                       {},
                       l.value("since_ms", TimeMs{0})};
      if (auto g = l.find("gpus"); g != l.end() && g->is_array()) {
        for (const auto& index : *g) {
          if (index.is_number_integer()) slot.gpus.push_back(index.get<int>());
        }
      }
      out.push_back(std::move(slot));
    }
  }
  if (out.empty() && !node.empty()) out.push_back({node, pid, 0, {}, 0});
  return out;
}

// The parameter servers of the learners column (LearnersJson).
inline std::vector<ServerSlot> ParseServers(const std::string& text) {
  std::vector<ServerSlot> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const auto& l : j) {
    if (!l.is_object() || !l.value("server", false)) continue;
    out.push_back({l.value("node", std::string()), l.value("pid", int64_t{0}),
                   l.value("index", static_cast<int>(out.size())),
                   l.value("address", std::string())});
  }
  return out;
}

// "'QUEUED', 'PLACED', …": the states that are not settled (job_state.h IsSettled), for an
// IN (…) list.
inline std::string ActiveStatesList() {
  std::vector<std::string> active;
  for (JobState s : AllJobStates()) {
    if (!IsSettled(s)) active.push_back(absl::StrCat("'", JobStateName(s), "'"));
  }
  return absl::StrJoin(active, ", ");
}

// A data set's tenants column: "*" for every tenant, else their names joined by ','.
// The tenants a data set or an admin's image is granted to, as one column: "*" for every tenant.
template <typename Grant>
std::string TenantsColumn(const Grant& d) {
  return d.all_tenants ? "*" : absl::StrJoin(d.tenants, ",");
}
template <typename Grant>
void ParseTenantsColumn(const std::string& column, Grant* d) {
  d->all_tenants = column == "*";
  d->tenants.clear();
  if (!d->all_tenants && !column.empty()) d->tenants = absl::StrSplit(column, ',');
}

}  // namespace weft::store_columns
