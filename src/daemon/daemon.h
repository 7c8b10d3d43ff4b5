// weftd as a library: flags (daemon/flags.h) → the store, the nodes and the executor
// (daemon/backends.h) → the controller, the REST API, the learners' coordinator and the webhook
// dispatcher → run, alone or among peers on a shared store (daemon/leader.h). apps/weftd.cc
// parses the command line and calls Run.
#pragma once

#include "daemon/flags.h"

namespace weft::daemon {

// Runs weftd with `flags` (bound by AddFlags; Run checks them with CheckFlags) until SIGINT or
// SIGTERM. Returns the process's exit status: 0 after a clean stop; 2 for a bad flag or config
// file; 1 for any other error at start (printed to stderr: a data directory another weftd holds,
// a store that does not open, a port taken). A leader that loses its lease exits at once with
// kDeposedExitCode (daemon/leader.h) instead of returning.
int Run(Flags flags);

}  // namespace weft::daemon
