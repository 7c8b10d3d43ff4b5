#!/usr/bin/env bash
# Load on weftd's REST API with wrk on loopback, kept-alive connections:
#   1. job status reads as a tenant (auth + store read + JSON), against /healthz in the same run
#      (no token, no store: the HTTP layer's own ceiling) as the baseline;
#   2. durable submits for a few seconds, then kill -9 of weftd in the middle of a second burst:
#      every submit that was answered 201 must be in the store after the restart;
#   3. the job list of a tenant holding every one of those jobs.
# Usage: bench/api_load.sh [SECONDS per run, default 10] [CONNECTIONS, default 16] [STORE]
# STORE: sqlite (the default) or postgresql — weftd --store on a throwaway PostgreSQL cluster
# this script starts (lib.sh start_pg; fsync on, as SQLite's synchronous=FULL).
# Needs wrk (WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh). Tenant rate limits are off here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CONNS=${2:-16}
STORE=${3:-sqlite}
command -v wrk >/dev/null || { echo "needs wrk: WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh" >&2; exit 1; }
WORK=$(mktemp -d /tmp/weft-api-load-XXXXXX)
trap 'stop_weftd; stop_pg; rm -rf "$WORK"' EXIT
FLAGS=(--tenant-requests-per-second 0)
case "$STORE" in
  sqlite) ;;
  postgresql) start_pg && FLAGS+=(--store "$PG_URI") ;;
  *) echo "STORE must be sqlite or postgresql" >&2; exit 2 ;;
esac

start_weftd "$WORK/data" "${FLAGS[@]}"
ADMIN=$(cat "$WORK/data/admin.token")
# A tenant whose quota fits no job: what it submits stays queued and trains nothing, so the
# machine's cores serve requests only.
"$BIN/weft" --token "$ADMIN" tenant create load --quota cpus=0.01 >/dev/null
TOKEN=$("$BIN/weft" --token "$ADMIN" token create load 2>/dev/null)
MANIFEST=$(printf 'name: load\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\nresources: {cpus: 1, memory_mb: 256}\n')
ID=$(WEFT_TOKEN=$TOKEN "$BIN/weft" submit <(echo "$MANIFEST") | sed -n 's/^job \(job-[^ ]*\) submitted.*/\1/p')
[[ -n "$ID" ]] || { echo "submit failed" >&2; exit 1; }

# wrk's summary: requests/s, p50 and p99 in ms, non-2xx answers.
LUA="$WORK/report.lua"
cat >"$LUA" <<'LUA'
ok, other = 0, 0  -- globals: done() reads each thread's with thread:get
function response(status, headers, body)
  if status >= 200 and status < 300 then ok = ok + 1 else other = other + 1 end
end
function setup(thread) table.insert(threads, thread) end
threads = {}
function done(summary, latency, requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do good = good + t:get("ok"); bad = bad + t:get("other") end
  io.write(string.format("RESULT %.0f %.2f %.2f %d %d %d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, good, bad, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
LUA
run_wrk() {  # run_wrk LABEL PATH [extra wrk args]  -> prints a line, sets RPS
  local label=$1 path=$2
  shift 2
  local out
  out=$(wrk -t2 -c"$CONNS" -d"${SECS}s" --latency -s "$LUA" "$@" "http://$WEFT_SERVER$path" | grep '^RESULT')
  read -r _ RPS P50 P99 OK BAD ERR <<<"$out"
  printf '%-34s %9s req/s  p50 %7s ms  p99 %7s ms  2xx %8s  other %5s  socket errors %s\n' \
    "$label" "$RPS" "$P50" "$P99" "$OK" "$BAD" "$ERR"
}

echo "== weftd REST API under wrk -t2 -c$CONNS, ${SECS} s each, keep-alive, $(nproc) cores, store $STORE"
run_wrk "GET /healthz (baseline)" /healthz
BASE=$RPS
run_wrk "GET /v1/jobs/ID (tenant status)" "/v1/jobs/$ID" -H "Authorization: Bearer $TOKEN"
STATUS=$RPS
STATUS_P99=$P99
echo "status reads / healthz: $(python3 -c "print(f'{$STATUS/$BASE:.2f}')")"

# Durable submits: POST the manifest as fast as wrk can.
SUBMIT_LUA="$WORK/submit.lua"
python3 - "$LUA" "$SUBMIT_LUA" "$MANIFEST" <<'PY'
import json, sys
src, dst, body = sys.argv[1:4]
with open(dst, "w") as f:
    f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/yaml"\n')
    f.write("wrk.body = %s\n" % json.dumps(body) + open(src).read())
PY
run_wrk_submit() { LUA_SAVED=$LUA; LUA=$SUBMIT_LUA; run_wrk "$@" -H "Authorization: Bearer $TOKEN"; LUA=$LUA_SAVED; }
run_wrk_submit "POST /v1/jobs (durable submit)" /v1/jobs
SUBMITS=$RPS
ACKED=$((OK + 1))  # and the first job

# A second burst, with weftd killed (-9) half way through it.
( sleep "$(python3 -c "print($SECS/2)")"; kill -9 "$WEFTD_PID" ) &
KILLER=$!
run_wrk_submit "POST /v1/jobs, kill -9 half way" /v1/jobs || true
wait "$KILLER" || true
ACKED=$((ACKED + OK))
wait "$WEFTD_PID" 2>/dev/null || true
start_weftd "$WORK/data" "${FLAGS[@]}"
STORED=$(WEFT_TOKEN=$TOKEN "$BIN/weft" list | tail -n +2 | wc -l)
echo "acknowledged submits: $ACKED; jobs of tenant load in the store after kill -9 and restart: $STORED"
if (( STORED < ACKED )); then echo "LOST: $((ACKED - STORED)) acknowledged submits" >&2; exit 1; fi

run_wrk "GET /v1/jobs?limit=1000 (of $STORED)" "/v1/jobs?limit=1000" -H "Authorization: Bearer $TOKEN"
LIST=$RPS
echo
echo "summary ($STORE store): status reads $STATUS/s (p99 $STATUS_P99 ms; goal >= 5000/s, p99 <= 20 ms), healthz $BASE/s," \
  "durable submits $SUBMITS/s (goal >= 500/s), $ACKED acknowledged, 0 lost, pages of 1,000 jobs $LIST/s"
