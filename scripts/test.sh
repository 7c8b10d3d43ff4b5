#!/usr/bin/env bash
# README command (2): installs dependencies, builds with warnings as errors, checks the habits the
# tools enforce (scripts/check.sh: format, thread-safety analysis, sizes), lints the API document
# (scripts/lint-openapi.sh, Redocly CLI), runs the whole test suite (ctest), then the parameter
# server's protocol tests under TSan (scripts/unit-tsan.sh).
#
#   scripts/test.sh                               the default run (CI)
#   scripts/test.sh --fuzz                        the default run, then each fuzz target for
#                                                 10,000 inputs (scripts/fuzz.sh, clang +
#                                                 libFuzzer) and the unit tests that need no
#                                                 libtorch under ASan + UBSan (scripts/unit-asan.sh,
#                                                 with the fuzzers' objects): about 15-20 minutes
#                                                 more, most of it clang's instrumented build
#   scripts/test.sh --sanitize address,undefined  the whole suite under ASan + UBSan, in
#                                                 build-address-undefined/
#   scripts/test.sh --sanitize thread             the whole suite under TSan, in build-thread/
#
# Any other arguments go to ctest (e.g. -R controller). Under a sanitizer every report fails the
# test that made it: weftd, the learners and the tests are all instrumented (Debian's libtorch,
# gRPC and the other libraries are not); tests/sanitizers/ holds the suppressions, each with why.
# The default run builds weft's runtime image (scripts/build-runtime-image.sh, about 3 minutes the
# first time) and runs every learner in a container; a sanitizer run runs them unconfined
# (WEFT_TEST_RUNTIME=none, which any run may set).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as it ends ("== stage: N s"), so a slow run says where it went.
STAGE_START=$SECONDS
stage() {
  echo "== $1: $((SECONDS - STAGE_START)) s"
  STAGE_START=$SECONDS
}
SANITIZE=""
FUZZ=0
CTEST_ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --fuzz) FUZZ=1; shift ;;
    --sanitize) SANITIZE="$2"; shift 2 ;;
    --sanitize=*) SANITIZE="${1#--sanitize=}"; shift ;;
    *) CTEST_ARGS+=("$1"); shift ;;
  esac
done
./scripts/install-deps.sh
stage "install-deps"
if [[ -z "$SANITIZE" ]]; then
  BUILD_DIR="${WEFT_BUILD_DIR:-build}"
  WEFT_BUILD_DIR="$BUILD_DIR" WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON" \
    ./scripts/build.sh
  stage "build"
  ./scripts/check.sh "$BUILD_DIR"
  stage "check"
  ./scripts/lint-openapi.sh
  stage "lint-openapi"
  # Every learner runs in a container of weft's runtime image (kept when up to date).
  ./scripts/build-runtime-image.sh "$BUILD_DIR/bin"
  stage "runtime image"
else
  BUILD_DIR="${WEFT_BUILD_DIR:-build-${SANITIZE//,/-}}"
  # Benchmarks are measured, not sanitized.
  WEFT_BUILD_DIR="$BUILD_DIR" WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON \
    -DWEFT_BUILD_BENCH=OFF -DWEFT_SANITIZE=$SANITIZE" ./scripts/build.sh
  SUPP="$PWD/tests/sanitizers"
  # The learners run unconfined (weftd --runtime none): in a container their reports could not
  # reach REPORTS, and weft's runtime image holds no sanitizer runtime. container_test skips.
  export WEFT_TEST_RUNTIME=none
  # Every report of every process (tests, weftd, learners) goes to a file in REPORTS: a learner
  # that a report stops is restarted from its checkpoint like any crashed learner, so its test
  # may pass; the run fails on any report all the same.
  REPORTS=$(mktemp -d /tmp/weft-sanitizer-reports-XXXXXX)
  LOG="log_path=$REPORTS/report"
  export ASAN_OPTIONS="$LOG:detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="$LOG:print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp"
  export TSAN_OPTIONS="$LOG:halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp"
fi
rc=0
(cd "$BUILD_DIR" && ctest -j2 --output-on-failure --timeout 1800 "${CTEST_ARGS[@]}") || rc=$?
stage "ctest"
if [[ -n "$SANITIZE" ]]; then
  reports=$(find "$REPORTS" -type f | wc -l)
  echo "== $SANITIZE: $reports report(s) from all processes (in $REPORTS)"
  for f in $(find "$REPORTS" -type f | head -5); do echo "--- $f"; head -60 "$f"; done
  [[ $reports -eq 0 ]] || rc=1
fi
[[ $rc -eq 0 ]] || exit $rc
if [[ -z "$SANITIZE" && ${#CTEST_ARGS[@]} -eq 0 ]]; then
  if [[ $FUZZ -eq 1 ]]; then
    ./scripts/fuzz.sh --runs "${WEFT_FUZZ_RUNS:-10000}"
    stage "fuzz"
    ./scripts/unit-asan.sh
    stage "unit-asan"
  fi
  ./scripts/unit-tsan.sh
  stage "unit-tsan"
fi
