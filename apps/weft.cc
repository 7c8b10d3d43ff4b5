// weft: the command-line client.
#include "cli/cli.h"

int main(int argc, char** argv) { return weft::cli::Run(argc, argv); }
