// weft_store_commit_duration_seconds (docs/operations.md), shared by the stores (internal to
// store/).
#pragma once

#include <string>

#include "common/metrics.h"

namespace weft::store_metrics {

// Records a committed write transaction's time, BEGIN to durable COMMIT, in seconds, under the
// label store=`store` ("sqlite", "postgresql").
inline void ObserveCommit(const std::string& store, double seconds) {
  static const bool declared = [] {
    MetricsRegistry::Global().DeclareHistogram(
        "weft_store_commit_duration_seconds",
        "store write transactions, from BEGIN to a durable COMMIT, in seconds", SecondsBuckets());
    return true;
  }();
  (void)declared;
  MetricsRegistry::Global().Observe("weft_store_commit_duration_seconds", {{"store", store}},
                                    seconds);
}

}  // namespace weft::store_metrics
