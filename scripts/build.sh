#!/usr/bin/env bash
# Configures and builds weft into ./build (binaries in build/bin). Two jobs: libtorch is heavy.
#
#   scripts/build.sh                  everything: the programs, tests and benchmarks
#   scripts/build.sh weftd weft ...   only the targets named (scripts/quickstart.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${WEFT_BUILD_DIR:-build}"
# WEFT_CMAKE_ARGS adds options, e.g. -DWEFT_WERROR=ON (scripts/test.sh and quickstart.sh set it).
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" \
  ${WEFT_CMAKE_ARGS:-} >/dev/null
targets=()
[[ $# -eq 0 ]] || targets=(--target "$@")
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}" "${targets[@]}"
