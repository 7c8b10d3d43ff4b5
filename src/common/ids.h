// Job ids: short, sortable by creation time, unique across restarts of weftd.
#pragma once

#include <string>

#include "common/clock.h"

namespace weft {

// "job-" + 8 base-36 characters of the creation time in ms + 4 random base-36 characters,
// e.g. "job-mhx3k2a9-7fq0". Ids sort by creation time at millisecond resolution.
std::string NewJobId(TimeMs now);

}  // namespace weft
