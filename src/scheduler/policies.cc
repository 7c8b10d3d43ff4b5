#include "scheduler/policies.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/fair_share_policy.h"
#include "scheduler/goodput_policy.h"
#include "scheduler/optimus_policy.h"
#include "scheduler/targets_policy.h"
#include "scheduler/tiresias_policy.h"

namespace weft::scheduler {

std::vector<std::string> PolicyNames() {
  return {"fifo", "tiresias", "optimus", "goodput", "targets", "fairshare"};
}

absl::StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name) {
  if (name == "fifo") return std::make_unique<FifoPolicy>();
  if (name == "tiresias") return std::make_unique<TiresiasPolicy>();
  if (name == "optimus") return std::make_unique<OptimusPolicy>();
  if (name == "goodput") return std::make_unique<GoodputPolicy>();
  if (name == "targets") return std::make_unique<TargetsPolicy>();
  if (name == "fairshare") return std::make_unique<FairSharePolicy>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown policy '", name, "'; known: ", absl::StrJoin(PolicyNames(), ", ")));
}

}  // namespace weft::scheduler
