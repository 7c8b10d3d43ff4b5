#!/usr/bin/env bash
# README command (2): installs dependencies, builds with warnings as errors, checks the habits the
# tools enforce (scripts/check.sh: format, thread-safety analysis, sizes), lints the API document
# (scripts/lint-openapi.sh, Redocly CLI), runs the whole test suite (ctest), then each fuzz
# target for 10,000 inputs (scripts/fuzz.sh, clang + libFuzzer) and the unit tests that need no
# libtorch under ASan + UBSan (scripts/unit-asan.sh, with the fuzzers' objects).
#
#   scripts/test.sh                               the default run (CI)
#   scripts/test.sh --sanitize address,undefined  the whole suite under ASan + UBSan, in
#                                                 build-address-undefined/
#   scripts/test.sh --sanitize thread             the whole suite under TSan, in build-thread/
#
# Any other arguments go to ctest (e.g. -R controller). Under a sanitizer every report fails the
# test that made it: weftd, the learners and the tests are all instrumented (Debian's libtorch,
# gRPC and the other libraries are not); tests/sanitizers/ holds the suppressions, each with why.
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZE=""
CTEST_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sanitize) SANITIZE="$2"; shift 2 ;;
    --sanitize=*) SANITIZE="${1#--sanitize=}"; shift ;;
    *) CTEST_ARGS+=("$1"); shift ;;
  esac
done
./scripts/install-deps.sh
if [[ -z "$SANITIZE" ]]; then
  BUILD_DIR="${WEFT_BUILD_DIR:-build}"
  WEFT_BUILD_DIR="$BUILD_DIR" WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON" \
    ./scripts/build.sh
  ./scripts/check.sh "$BUILD_DIR"
  ./scripts/lint-openapi.sh
else
  BUILD_DIR="${WEFT_BUILD_DIR:-build-${SANITIZE//,/-}}"
  # Benchmarks are measured, not sanitized.
  WEFT_BUILD_DIR="$BUILD_DIR" WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON \
    -DWEFT_BUILD_BENCH=OFF -DWEFT_SANITIZE=$SANITIZE" ./scripts/build.sh
  SUPP="$PWD/tests/sanitizers"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp"
fi
(cd "$BUILD_DIR" && ctest -j2 --output-on-failure --timeout 1800 "${CTEST_ARGS[@]}")
if [[ -z "$SANITIZE" && ${#CTEST_ARGS[@]} -eq 0 ]]; then
  ./scripts/fuzz.sh --runs "${WEFT_FUZZ_RUNS:-10000}"
  ./scripts/unit-asan.sh
fi
