#!/usr/bin/env bash
# The long fault-injection run: TRIALS (default 50) seeded trials of tests/integration/
# fault_injection_test.cc, each killing the learner, weftd or both at a random instant. Prints the
# tallies and recovery times as its last line of JSON.
#
# Usage: bench/fault_injection.sh [TRIALS=50] [SEED=1]
set -euo pipefail
cd "$(dirname "$0")/.."
WEFT_FAULT_TRIALS=${1:-50} WEFT_FAULT_SEED=${2:-1} \
  build/tests/fault_injection_test --gtest_brief=1 2>&1 | grep -E '^\{|FAILED|Failure|trial' || true
