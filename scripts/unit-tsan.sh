#!/usr/bin/env bash
# The part of the suite that CI runs under ThreadSanitizer on every submission: the parameter
# servers' protocol tests (lock-free slots shared by learner threads and the applier; one
# scale-out shard under pushing threads), built with Debian's clang in build-tsan/. They need no
# libtorch, so they cost only their own files to build.
# The whole suite under TSan takes longer than CI allows: scripts/test.sh --sanitize thread.
#
#   scripts/unit-tsan.sh            build and run them (what scripts/test.sh runs)
#   scripts/unit-tsan.sh -R Kills   extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${WEFT_TSAN_BUILD_DIR:-build-tsan}"
TESTS=(shared_ps_test shared_ps_stress_test shard_test)

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCH=OFF -DWEFT_SANITIZE=thread >/dev/null
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}" --target "${TESTS[@]}" >"$BUILD_DIR.unit.log" 2>&1 ||
  { tail -40 "$BUILD_DIR.unit.log"; exit 1; }

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp"
# Only the binaries built above run: the tree's other tests are listed as *_NOT_BUILT (and
# pg_store_test and the python_ tests, plain add_tests, have no such stand-in).
(cd "$BUILD_DIR" && ctest -j2 --output-on-failure --timeout 900 \
  -E '_NOT_BUILT$|^pg_store_test$|^python_(client|notebook)_test$' "$@")
