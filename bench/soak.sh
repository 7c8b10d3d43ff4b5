#!/usr/bin/env bash
# Soak: TENANTS tenants with different weights each queue JOBS small real jobs (a one-step MLP,
# 0.1 cpu), all at once, then weftd runs them all. Prints, while it runs, the control round's
# time as the queue grows and drains (GET /v1/queue: round), and at the end:
#   - every job COMPLETED exactly once, none lost; preemptions (a job stopped with a checkpoint
#     and resumed from it) counted apart from any other restart; every learner start in weftd's
#     log accounted for in the jobs' histories;
#   - weighted fair share: each tenant's cpu-seconds while every tenant still had jobs waiting,
#     against its weight's share (error = |share - entitled| / entitled; goal <= 5 %), from
#     WEFT_SOAK_SETTLE_S (default 20) seconds after the tenants' jobs were released.
# Usage: bench/soak.sh [JOBS per tenant, default 100] [TENANTS, default 10]
# The weights are 1,1,1,1,2,2,2,3,3,4 (sum 20), repeated for more tenants; with 0.1 cpu per
# learner a 2-core host runs 20 learners at a time, so weighted DRF can give each tenant exactly
# its weight in learners. Takes about 15 minutes on 2 cores for 1,000 jobs.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
JOBS=${1:-100}
TENANTS=${2:-10}
WEIGHTS=(1 1 1 1 2 2 2 3 3 4)
SETTLE=${WEFT_SOAK_SETTLE_S:-20}  # seconds after the release before fair share is measured
WORK=$(mktemp -d /tmp/weft-soak-XXXXXX)
trap 'stop_weftd; rm -rf "$WORK"' EXIT

start_weftd "$WORK/data" --tenant-requests-per-second 0
ADMIN=$(cat "$WORK/data/admin.token")
API="http://$WEFT_SERVER"
echo "== soak: $TENANTS tenants x $JOBS jobs, weftd at $WEFT_SERVER, $(nproc) cores"

# Tenants hold their jobs in the queue (a quota nothing fits) until all are submitted.
declare -a NAMES TOKENS
for ((t = 0; t < TENANTS; t++)); do
  NAMES[t]="tenant-$t"
  w=${WEIGHTS[t % ${#WEIGHTS[@]}]}
  "$BIN/weft" --token "$ADMIN" tenant create "${NAMES[t]}" --weight "$w" --quota cpus=0.01 >/dev/null
  TOKENS[t]=$("$BIN/weft" --token "$ADMIN" token create "${NAMES[t]}" 2>/dev/null)
done
MANIFEST='name: soak
model: {architecture: mlp, hidden_units: [16]}
data: {train_samples: 64, test_samples: 64}
training: {epochs: 1, batch_size: 64, threads: 1}
resources: {cpus: 0.1, memory_mb: 512}
checkpoint: {every_seconds: 0}
'
round() {  # "queued N, round last X ms (max Y ms) over Z active jobs"
  curl -fsS -H "Authorization: Bearer $ADMIN" "$API/v1/queue" | python3 -c '
import json, sys
q = json.load(sys.stdin)
r = q["round"]
n, last, peak, active = len(q["queue"]), r["last_ms"], r["max_ms"], r["active_jobs"]
print(f"queued {n:5d}  round {last:7.2f} ms (max {peak:7.2f} ms) over {active:5d} active jobs")'
}
submitted=0
for ((i = 0; i < JOBS; i++)); do
  for ((t = 0; t < TENANTS; t++)); do
    curl -fsS -o /dev/null -X POST -H "Authorization: Bearer ${TOKENS[t]}" \
      -H "Content-Type: application/yaml" --data-binary "$MANIFEST" "$API/v1/jobs"
    submitted=$((submitted + 1))
  done
  if (( (i + 1) % (JOBS / 5 > 0 ? JOBS / 5 : 1) == 0 )); then
    sleep 0.5  # a round or two over the new queue
    echo "submitted $submitted: $(round)"
  fi
done

# Release the quotas: from here every tenant has jobs waiting until its last one starts.
RELEASED=$(python3 -c 'import time; print(int(time.time() * 1000))')
for ((t = 0; t < TENANTS; t++)); do
  curl -fsS -o /dev/null -X PATCH -H "Authorization: Bearer $ADMIN" \
    -H "Content-Type: application/json" --data '{"quota": null}' "$API/v1/tenants/${NAMES[t]}"
done
START=$(date +%s)
while true; do
  sleep 15
  left=$(curl -fsS -H "Authorization: Bearer $ADMIN" "$API/v1/jobs?limit=1000" | python3 -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
print(sum(j["state"] not in ("COMPLETED", "FAILED") for j in jobs))')
  echo "$(($(date +%s) - START)) s: $left jobs not finished; $(round)"
  (( left == 0 )) && break
  (( $(date +%s) - START > 7200 )) && { echo "not finished after 2 h" >&2; exit 1; }
done
ELAPSED=$(($(date +%s) - START))

# Every job's history, fetched as the admin, page by page.
python3 - "$API" "$ADMIN" "$RELEASED" "$ELAPSED" "$WORK/data.weftd.log" "$TENANTS" "$JOBS" \
  "${WEIGHTS[*]}" "$SETTLE" <<'PY'
import datetime, json, sys, urllib.request
api, admin, released, elapsed, log, tenants, jobs_each, weights, settle = sys.argv[1:10]
settle = float(settle)
released, tenants, jobs_each = int(released) / 1000, int(tenants), int(jobs_each)
weights = [float(w) for w in weights.split()]
def get(path):
    req = urllib.request.Request(api + path, headers={"Authorization": "Bearer " + admin})
    return json.load(urllib.request.urlopen(req))
jobs, after = [], None
while True:
    page = get("/v1/jobs?limit=1000" + (f"&after={after}" if after else ""))
    jobs += page["jobs"]
    after = page.get("next")
    if not after:
        break
def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
runs = {}   # tenant -> [(start, end)]
last_start = {}
states, twice, preempted, other_restarts, all_starts = {}, 0, 0, 0, 0
for j in jobs:
    states[j["state"]] = states.get(j["state"], 0) + 1
    d = get("/v1/jobs/" + j["id"])
    starts = [t(e["time"]) for e in d["history"] if e["to"] == "STARTING"]
    ends = [t(e["time"]) for e in d["history"] if e["to"] in ("COMPLETED", "FAILED")]
    all_starts += len(starts)
    if len(ends) != 1:
        twice += 1  # completed (or failed) more than once
    for e in d["history"]:
        if e["to"] == "QUEUED" and e["from"]:
            if e["reason"].startswith("requeued after preemption"):
                preempted += 1
            else:
                other_restarts += 1
                print(f"  {j['id']} restarted: {e['reason']}")
    if starts and ends:
        runs.setdefault(j["tenant"], []).append((starts[0], ends[-1]))
        last_start[j["tenant"]] = max(last_start.get(j["tenant"], 0), starts[-1])
launches = sum("starting learner, attempt" in line for line in open(log))
expected = tenants * jobs_each
print(f"jobs: {len(jobs)} stored of {expected} submitted; states {states}; ended more than "
      f"once: {twice}; preemptions (resumed from a checkpoint): {preempted}; other restarts: "
      f"{other_restarts}; learner starts: {all_starts} in the jobs' histories, {launches} in "
      f"weftd's log")
print(f"all done in {elapsed} s after the quotas were released "
      f"({expected / max(int(elapsed), 1):.2f} jobs/s)")
# The window where every tenant still had jobs waiting, from SETTLE seconds after the quotas
# were released (they are released one by one, and the first tenants take the idle cores until
# the policy has preempted its way to the weights) until the first tenant's last start.
begin, end = released + settle, min(last_start.values())
cpu = {}
for tenant, spans in runs.items():
    cpu[tenant] = sum(max(0.0, min(e, end) - max(s, begin)) * 0.1 for s, e in spans)
total = sum(cpu.values())
W = sum(weights[i % len(weights)] for i in range(tenants))
errors = []
print(f"fair share over the {end - begin:.0f} s while every tenant had jobs waiting "
      f"(from {settle:.0f} s after the release):")
for i in range(tenants):
    name = f"tenant-{i}"
    w = weights[i % len(weights)]
    share, entitled = cpu.get(name, 0) / total, w / W
    errors.append(abs(share - entitled) / entitled)
    print(f"  {name}  weight {w:.0f}  cpu-s {cpu.get(name, 0):8.1f}  share {share:6.1%}  "
          f"entitled {entitled:6.1%}  error {errors[-1]:6.1%}")
print(f"summary: {states.get('COMPLETED', 0)}/{expected} completed, "
      f"{expected - len(jobs)} lost, {twice} ended twice, {other_restarts} restarts other than "
      f"{preempted} preemptions, fair-share error max "
      f"{max(errors):.1%} mean {sum(errors) / len(errors):.1%} (goal <= 5 %)")
PY
