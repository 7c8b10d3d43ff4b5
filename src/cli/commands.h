// The `weft` command's subcommands, registered on the CLI11 app by area: jobs (job_commands.cc),
// hyperparameter searches (experiment_commands.cc), the cluster's tenants, tokens, queue and
// nodes (cluster_commands.cc), a tenant's uploaded artifacts (artifact_commands.cc), the data
// sets manifests name (dataset_commands.cc), the container images command jobs run on
// (image_commands.cc) and webhooks (webhook_commands.cc). Each sets the exit code in the shared
// context when it runs.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "cli/client.h"

namespace weft::cli {

struct Context {
  std::string server = kDefaultServer;
  std::string token;
  std::string ca_cert;  // PEM file to verify an https:// weftd by; empty: the system's
  int exit_code = 2;    // what Run returns; a subcommand sets it
  Client client() const { return Client(server, token, ca_cert); }
};

void AddJobCommands(CLI::App& app, Context& ctx);
void AddExperimentCommands(CLI::App& app, Context& ctx);
void AddClusterCommands(CLI::App& app, Context& ctx);
void AddArtifactCommands(CLI::App& app, Context& ctx);
void AddDatasetCommands(CLI::App& app, Context& ctx);
void AddImageCommands(CLI::App& app, Context& ctx);
void AddWebhookCommands(CLI::App& app, Context& ctx);

// `s` seconds for people: "42s", "3m05s", "1h02m"; "-" when negative.
std::string Duration(double s);

// Downloads job `id`'s delivered (else final) model to `out` (default ID-KIND.pt), saying so;
// returns the exit code.
int DownloadModel(const Client& api, const std::string& id, bool delivered, std::string out);

// Uploads the file at `path` as the caller's artifact `name`, saying so; returns the exit code.
int UploadArtifact(const Client& api, const std::string& name, const std::string& path);

}  // namespace weft::cli
