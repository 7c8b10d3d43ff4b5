// The jobs table's columns, shared by the stores (internal to store/): the same names and the
// same encoding of a job's learners in both schemas.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "job/job.h"

namespace weft::store_columns {

inline constexpr char kJobColumns[] =
    "id, tenant, name, state, reason, manifest, spec_json, created_ms, updated_ms, attempt, "
    "node, learner_pid, epoch, epochs_total, step, steps_total, samples, best_test_accuracy, "
    "deliver_met_ms, complete_met_ms, restarts, learners";

// The learners column: [{"node": …, "pid": …}, …] by rank.
inline std::string LearnersJson(const std::vector<LearnerSlot>& learners) {
  nlohmann::json j = nlohmann::json::array();
  for (const LearnerSlot& l : learners) j.push_back({{"node", l.node}, {"pid", l.pid}});
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The learners column read back; a row without one (SQLite's version 3) has rank 0 in
// node / learner_pid.
inline std::vector<LearnerSlot> ParseLearners(const std::string& text, const std::string& node,
                                              int64_t pid) {
  std::vector<LearnerSlot> out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) {
    for (const auto& l : j) {
      if (!l.is_object()) continue;
      out.push_back({l.value("node", std::string()), l.value("pid", int64_t{0})});
    }
  }
  if (out.empty() && !node.empty()) out.push_back({node, pid});
  return out;
}

}  // namespace weft::store_columns
