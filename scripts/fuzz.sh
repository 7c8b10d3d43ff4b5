#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with Debian's clang under ASan + UBSan in
# build-fuzz/ and runs each from its seed corpus (tests/fuzz/corpus/<target>/, read only: new
# inputs go to a temporary directory).
#
#   scripts/fuzz.sh                 each target for 10,000 inputs (what scripts/test.sh --fuzz runs)
#   scripts/fuzz.sh --runs 1000000  longer (bench/fuzz.sh)
#   scripts/fuzz.sh fuzz_rest       only the targets named
#
# Prints each target's executions, speed and crashes; exits 1 if any target crashed, with the
# crashing input kept in build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=10000
TARGETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[[ ${#TARGETS[@]} -gt 0 ]] ||
  TARGETS=(fuzz_manifest fuzz_rest fuzz_coordinator fuzz_idx fuzz_csv fuzz_command_events
           fuzz_image_archive)
BUILD_DIR="${WEFT_FUZZ_BUILD_DIR:-build-fuzz}"

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCH=OFF \
    -DWEFT_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
fi
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}" --target "${TARGETS[@]}" >"$BUILD_DIR.log" 2>&1 ||
  { tail -40 "$BUILD_DIR.log"; exit 1; }

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p "$BUILD_DIR/crashes"
WORK=$(mktemp -d /tmp/weft-fuzz-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
printf '%-18s %12s %10s %8s %s\n' target executions "exec/s" crashes "new inputs"
for t in "${TARGETS[@]}"; do
  mkdir -p "$WORK/$t"
  seeds="tests/fuzz/corpus/${t#fuzz_}"
  dict="tests/fuzz/${t#fuzz_}.dict"
  args=(-runs="$RUNS" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1
        -artifact_prefix="$BUILD_DIR/crashes/$t-")
  [[ -f "$dict" ]] && args+=(-dict="$dict")
  rc=0
  "$BUILD_DIR/tests/fuzz/$t" "${args[@]}" "$WORK/$t" "$seeds" >"$WORK/$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t.log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$WORK/$t.log")
  crashes=0
  if [[ $rc -ne 0 ]]; then crashes=1; failed=1; fi
  printf '%-18s %12s %10s %8s %s\n' "$t" "${execs:-?}" "${speed:-?}" "$crashes" \
    "$(find "$WORK/$t" -type f | wc -l)"
  if [[ $rc -ne 0 ]]; then
    grep -E "ERROR|fuzz_[a-z]+:|SUMMARY|#0|#1 |#2 |#3 " "$WORK/$t.log" | head -30
  fi
done
exit $failed
