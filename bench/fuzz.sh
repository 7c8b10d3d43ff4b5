#!/usr/bin/env bash
# The long fuzz run: every libFuzzer target for 1,000,000 inputs (or RUNS), under ASan + UBSan,
# printing executions, speed and crashes per target. The default test run does 10,000 each.
# Usage: bench/fuzz.sh [RUNS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
shift || true
exec ./scripts/fuzz.sh --runs "$RUNS" "$@"
