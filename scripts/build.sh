#!/usr/bin/env bash
# Configures and builds weft into ./build (binaries in build/bin). Two jobs: libtorch is heavy.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${WEFT_BUILD_DIR:-build}"
# WEFT_CMAKE_ARGS adds options, e.g. -DWEFT_WERROR=ON (scripts/test.sh sets it).
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  ${WEFT_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}"
