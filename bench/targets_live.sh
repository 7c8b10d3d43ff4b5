#!/usr/bin/env bash
# Target-aware scheduling with real learners (issue 16): the scenario of tests/integration/
# targets_test.cc — 2 logical nodes × 1 cpu (pinned to cores 0 and 1), four MLP jobs with
# targets {deliver: DELIVER, complete: 0.99} submitted together — run under each policy on a
# fresh weftd, one after the other. Prints per job and on average the time from submission to the
# delivered model and to COMPLETED, targets' ratios to the others, and how far ahead the live
# learning curve foresaw each delivery (weftd logs it when the deliver target is met). Last line:
# JSON.
#
# Usage: bench/targets_live.sh [POLICIES="targets fairshare fifo goodput"] [DELIVER=0.86] [EPOCHS=12]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
POLICIES=${1:-targets fairshare fifo goodput}
DELIVER=${2:-0.86}
EPOCHS=${3:-12}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
cpus=$(nproc)
cat >"$WORK/nodes.yaml" <<YAML
nodes:
  - {name: node-a, cpus: 1, memory_mb: 8192, cpuset: [0]}
  - {name: node-b, cpus: 1, memory_mb: 8192, cpuset: [$((cpus > 1 ? 1 : 0))]}
YAML
for seed in 1 2 3 4; do
  cat >"$WORK/mlp-$seed.yaml" <<YAML
name: mlp-$seed
model: {architecture: mlp, hidden_units: [128]}
data: {dataset: fashion-mnist, train_samples: 30000, test_samples: 2000}
training: {epochs: $EPOCHS, batch_size: 64, optimizer: adam, eval_every_steps: 60, threads: 1, seed: $seed}
resources: {cpus: 1, memory_mb: 1024}
targets: {deliver: $DELIVER, complete: 0.99}
YAML
done

echo "targets live: 2 nodes × 1 cpu, 4 MLP jobs (30,000 samples × $EPOCHS epochs, deliver $DELIVER), policies: $POLICIES"
for policy in $POLICIES; do
  start_weftd "$WORK/$policy" --config "$WORK/nodes.yaml" --policy "$policy"
  python3 - "$BIN" "$WORK" "$policy" >>"$WORK/results" <<'PY'
import datetime, json, os, re, subprocess, sys, time, urllib.request
binp, work, policy = sys.argv[1], sys.argv[2], sys.argv[3]
server, token = os.environ["WEFT_SERVER"], os.environ["WEFT_TOKEN"]

def get(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req))

def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

ids = []
for seed in (1, 2, 3, 4):
    out = subprocess.run([f"{binp}/weft", "submit", f"{work}/mlp-{seed}.yaml"], check=True,
                         capture_output=True, text=True).stdout
    ids.append(re.search(r"job (job-\S+) submitted", out).group(1))
while True:
    jobs = [get(f"/v1/jobs/{i}") for i in ids]
    if all(j["state"] in ("COMPLETED", "FAILED") for j in jobs):
        break
    time.sleep(0.5)
res = {"policy": policy, "jobs": []}
for j in jobs:
    if j["state"] != "COMPLETED":
        raise SystemExit(f"{policy}: job {j['id']} {j['state']}: {j['reason']}")
    met = j["targets"]["deliver"]["met_at"]
    res["jobs"].append({
        "id": j["id"],
        "deliver_s": round(t(met) - t(j["created_at"]), 1) if met else None,
        "complete_s": round(t(j["updated_at"]) - t(j["created_at"]), 1),
        "attempts": j["attempt"],
        "accuracy": j["models"]["final"]["test_accuracy"]})
print(json.dumps(res))
PY
  grep -h "deliver target met after" "$WORK/$policy.weftd.log" | sed "s/^.*job /$policy job /" >>"$WORK/forecasts" || true
  stop_weftd
done

python3 - "$WORK/results" "$WORK/forecasts" <<'PY'
import json, re, statistics, sys
runs = {r["policy"]: r for r in map(json.loads, open(sys.argv[1]))}
mean = lambda xs: sum(xs) / len(xs)
print(f"{'policy':10s} {'time to delivery s, per job':>30s} {'mean':>7s}   {'time to completion s, per job':>30s} {'mean':>7s}  attempts")
out = {}
for p, r in runs.items():
    d = [j["deliver_s"] for j in r["jobs"]]
    c = [j["complete_s"] for j in r["jobs"]]
    print(f"{p:10s} {' '.join(f'{x:7.1f}' for x in d):>30s} {mean(d):7.1f}   "
          f"{' '.join(f'{x:7.1f}' for x in c):>30s} {mean(c):7.1f}  {[j['attempts'] for j in r['jobs']]}")
    out[p] = {"deliver_s": d, "complete_s": c, "mean_deliver_s": round(mean(d), 1),
              "mean_complete_s": round(mean(c), 1),
              "final_accuracy": [j["accuracy"] for j in r["jobs"]]}
if "targets" in out:
    for p in [p for p in runs if p != "targets"]:
        out[f"deliver_targets_over_{p}"] = round(out["targets"]["mean_deliver_s"] / out[p]["mean_deliver_s"], 3)
        out[f"complete_targets_over_{p}"] = round(out["targets"]["mean_complete_s"] / out[p]["mean_complete_s"], 3)
        print(f"targets / {p}: mean time to delivery {out[f'deliver_targets_over_{p}']:.3f}, "
              f"mean time to completion {out[f'complete_targets_over_{p}']:.3f}")
first, last = [], []
try:
    for line in open(sys.argv[2]):
        m = re.search(r"\(([+-]\d+) %\) first.*\(([+-]\d+) %\) at the evaluation before", line)
        if m:
            first.append(abs(int(m.group(1))))
            last.append(abs(int(m.group(2))))
except FileNotFoundError:
    pass
if first:
    print(f"learning-curve forecast of the samples to delivery, |error| over {len(first)} jobs: "
          f"first forecast median {statistics.median(first)} % (max {max(first)} %), "
          f"at the evaluation before median {statistics.median(last)} % (max {max(last)} %)")
    out["forecast_abs_error_pct"] = {"first_median": statistics.median(first), "first_max": max(first),
                                     "last_median": statistics.median(last), "last_max": max(last),
                                     "jobs": len(first)}
print(json.dumps({"bench": "targets_live", **out}))
PY
