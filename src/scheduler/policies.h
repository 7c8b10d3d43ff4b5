// Every policy weft ships, by name — the one list weftd and weft-sim choose from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/policy.h"

namespace weft::scheduler {

// "fifo", "tiresias", "optimus", "goodput", "targets", "fairshare". InvalidArgument listing the
// names otherwise.
absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name);
std::vector<std::string> PolicyNames();

}  // namespace weft::scheduler
