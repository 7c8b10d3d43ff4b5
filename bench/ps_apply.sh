#!/usr/bin/env bash
# The shared-memory parameter server's applier against memcpy in the same run (issue 15's goal:
# plain SGD ≥ 0.7 × memcpy bytes/s at 16 M parameters). Usage: bench/ps_apply.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${WEFT_BUILD_DIR:-build}"
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}" --target bench_ps_apply >/dev/null
"$BUILD_DIR/bin/bench_ps_apply" "${1:-15}"
