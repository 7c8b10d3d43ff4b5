#include "cli/cli.h"

#include <csignal>
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/commands.h"

namespace weft::cli {

int Run(int argc, char** argv) {
  // weftd may close a connection before taking a whole request (an upload it refuses): that is an
  // error to report, not a reason to die.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"weft: submit and follow training jobs on a weft cluster"};
  app.require_subcommand(1);
  Context ctx;
  if (const char* env = std::getenv("WEFT_SERVER"); env && *env) ctx.server = env;
  if (const char* env = std::getenv("WEFT_TOKEN")) ctx.token = env;
  if (const char* env = std::getenv("WEFT_CA_CERT")) ctx.ca_cert = env;
  app.add_option(
      "--server", ctx.server,
      "weftd's REST address (default $WEFT_SERVER or " + std::string(kDefaultServer) + ")");
  app.add_option("--ca-cert", ctx.ca_cert,
                 "PEM file of the certificates an https:// weftd's must chain to (default "
                 "$WEFT_CA_CERT, else the system's; a self-signed weftd: its --tls-cert)");
  app.add_option("--token", ctx.token,
                 "bearer token (default $WEFT_TOKEN): a tenant token, or the admin token from "
                 "<data-dir>/admin.token for tenant and token commands");
  AddJobCommands(app, ctx);
  AddExperimentCommands(app, ctx);
  AddClusterCommands(app, ctx);
  AddArtifactCommands(app, ctx);
  AddDatasetCommands(app, ctx);
  AddImageCommands(app, ctx);
  AddWebhookCommands(app, ctx);
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}

}  // namespace weft::cli
