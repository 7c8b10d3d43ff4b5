#!/usr/bin/env bash
# README command (2): installs dependencies, builds, and runs the whole test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd "${WEFT_BUILD_DIR:-build}"
ctest -j2 --output-on-failure --timeout 900
