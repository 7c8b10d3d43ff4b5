#!/usr/bin/env bash
# The part of the suite that scripts/test.sh --fuzz runs under ASan + UBSan: the unit tests that
# need no libtorch (job, store, scheduler, executor, controller, API, common, simulator, parameter
# server), built with
# Debian's clang in build-fuzz/ next to the fuzzers, from the same instrumented objects
# (-fsanitize=fuzzer-no-link,address,undefined), so they cost only their own files to build.
# The whole suite under the sanitizers (learners, libtorch, weftd end to end) takes longer than
# CI allows: scripts/test.sh --sanitize address,undefined.
#
#   scripts/unit-asan.sh            build and run them (what scripts/test.sh --fuzz runs)
#   scripts/unit-asan.sh -R store   extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${WEFT_FUZZ_BUILD_DIR:-build-fuzz}"
TESTS=(job_spec_test job_state_test learner_contract_test audit_test sqlite_store_test fifo_policy_test
       policies_test fair_share_policy_test decision_check_test controller_test
       controller_recovery_test controller_gang_test controller_elastic_test disk_quota_test
       file_tree_test local_executor_test command_event_reader_test spawn_test tls_identity_test
       memory_cgroups_test rate_limit_test http_test env_test metrics_test sse_test event_hub_test
       app_trace_test simulator_test shared_ps_test shared_ps_stress_test shard_test)

CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_FUZZ=ON -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCH=OFF \
  -DWEFT_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
cmake --build "$BUILD_DIR" -j"${WEFT_JOBS:-2}" --target "${TESTS[@]}" >"$BUILD_DIR.unit.log" 2>&1 ||
  { tail -40 "$BUILD_DIR.unit.log"; exit 1; }

SUPP="$PWD/tests/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp"
# Only the binaries built above run: the tree's other tests are listed as *_NOT_BUILT.
(cd "$BUILD_DIR" && ctest -j2 --output-on-failure --timeout 600 -E '_NOT_BUILT$' "$@")
