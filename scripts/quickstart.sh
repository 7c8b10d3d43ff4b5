#!/usr/bin/env bash
# README command (1): installs dependencies, builds weft and its runtime image (learners run in
# containers), starts weftd on ./weft-data with the embedded
# SQLite store, creates a token for tenant `default` with the admin token weftd wrote on its first
# start, submits examples/fashion-mnist-cnn.yaml as that tenant, follows it with a live progress
# line, and prints where the delivered and final models are and their test accuracy.
#
#   WEFT_PORT=8470 (REST port), WEFT_DATA_DIR=./weft-data, WEFT_MANIFEST=examples/fashion-mnist-cnn.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Only the programs a job needs (weft-learner brings weft-event-reader; the tests and benchmarks
# are scripts/test.sh's to build), with the flags scripts/test.sh uses, so that it goes on from
# this build instead of starting over.
WEFT_CMAKE_ARGS="${WEFT_CMAKE_ARGS:-} -DWEFT_WERROR=ON" \
  ./scripts/build.sh weftd weft weft-learner weft-ps
# weft's runtime image, which every learner's container runs on (about 3 minutes the first time).
./scripts/build-runtime-image.sh

PORT="${WEFT_PORT:-8470}"
DATA_DIR="${WEFT_DATA_DIR:-./weft-data}"
MANIFEST="${WEFT_MANIFEST:-examples/fashion-mnist-cnn.yaml}"
export WEFT_SERVER="127.0.0.1:${PORT}"
BIN=build/bin

# Owner-only: the data directory holds every tenant's models and weftd's secrets.
umask 077
mkdir -p "$DATA_DIR"
echo "starting weftd (data dir $DATA_DIR, http://$WEFT_SERVER, log $DATA_DIR/weftd.log)"
"$BIN/weftd" --data-dir "$DATA_DIR" --listen "$WEFT_SERVER" >>"$DATA_DIR/weftd.log" 2>&1 &
WEFTD_PID=$!
trap 'kill $WEFTD_PID 2>/dev/null; wait $WEFTD_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  if curl -fsS "http://$WEFT_SERVER/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $WEFTD_PID 2>/dev/null; then
    echo "weftd did not start:"; tail -5 "$DATA_DIR/weftd.log"; exit 1
  fi
  sleep 0.1
done

# The admin token manages tenants; jobs are submitted with a tenant's token.
WEFT_TOKEN=$("$BIN/weft" --token "$(cat "$DATA_DIR/admin.token")" token create default)
export WEFT_TOKEN
echo "submitting as tenant default (token in \$WEFT_TOKEN for this run; \`weft token create\` makes more)"

start=$(date +%s)
status=0
"$BIN/weft" submit "$MANIFEST" --follow || status=$?
echo "wall time: $(( $(date +%s) - start )) s"
echo "the job stays in $DATA_DIR; start weftd again on it to see it: $BIN/weftd --data-dir $DATA_DIR"
echo "(weft commands need a token: export WEFT_TOKEN=\$($BIN/weft --token \$(cat $DATA_DIR/admin.token) token create default))"
exit $status
