#!/usr/bin/env bash
# README command (2): installs dependencies, builds with warnings as errors, checks the habits the
# tools enforce (scripts/check.sh: format, thread-safety analysis, sizes) and runs the whole test
# suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON" ./scripts/build.sh
./scripts/check.sh "${WEFT_BUILD_DIR:-build}"
cd "${WEFT_BUILD_DIR:-build}"
ctest -j2 --output-on-failure --timeout 900
