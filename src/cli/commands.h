// The `weft` command's subcommands, registered on the CLI11 app by area: jobs (job_commands.cc)
// and the cluster's tenants, tokens, queue and nodes (cluster_commands.cc). Each sets the exit
// code in the shared context when it runs.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "cli/client.h"

namespace weft::cli {

struct Context {
  std::string server = kDefaultServer;
  std::string token;
  int exit_code = 2;  // what Run returns; a subcommand sets it
  Client client() const { return Client(server, token); }
};

void AddJobCommands(CLI::App& app, Context& ctx);
void AddClusterCommands(CLI::App& app, Context& ctx);

}  // namespace weft::cli
