// Ids and secrets: job and experiment ids (short, sortable by creation time, unique across restarts
// of weftd), bearer tokens and their public ids.
#pragma once

#include <string>

#include "common/clock.h"

namespace weft {

// "job-" + 8 base-36 characters of the creation time in ms + 4 random base-36 characters,
// e.g. "job-mhx3k2a9-7fq0". Ids sort by creation time at millisecond resolution.
std::string NewJobId(TimeMs now);
// An experiment's id: "exp-" and the rest as a job's.
std::string NewExperimentId(TimeMs now);

// A bearer token: "weft_" + 64 hex characters of 256 bits from the OS's CSPRNG (OpenSSL
// RAND_bytes). Aborts if the CSPRNG fails: a weak token is worse than none.
std::string NewSecretToken();

// A token's public id, "tok-" + 10 hex characters (not secret: names the token to revoke it).
std::string NewTokenId();

// A webhook's id, "hook-" + 10 hex characters, and its signing secret, "whsec_" + 64 hex
// characters of 256 bits from the CSPRNG (aborts if it fails, as NewSecretToken).
std::string NewWebhookId();
std::string NewWebhookSecret();

}  // namespace weft
