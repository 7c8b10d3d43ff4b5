// The `weft` command-line client of weftd's REST API (CLI11 + cpp-httplib).
#pragma once

namespace weft::cli {

// Runs the CLI. Exit codes: 0 success; 1 the server refused or the job did not complete;
// 2 bad usage or the server cannot be reached.
int Run(int argc, char** argv);

}  // namespace weft::cli
