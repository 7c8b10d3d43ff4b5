// weftd: the weft training service daemon (REST API, store, scheduler, executor, coordinator);
// src/daemon/ wires it.
#include <utility>

#include "CLI/CLI.hpp"
#include "daemon/daemon.h"

int main(int argc, char** argv) {
  CLI::App app{"weftd: the weft training service daemon"};
  weft::daemon::Flags flags;
  weft::daemon::AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  return weft::daemon::Run(std::move(flags));
}
