#!/usr/bin/env bash
# ElasticDL's headline experiment in miniature (issue 14): two jobs arrive DELAY seconds apart on
# a cluster of 2 logical nodes × 1 cpu. Run 1: fixed gangs of 2 learners — the second waits for
# the first. Run 2: elastic jobs {min: 1, max: 2} — the first grows to 2 on the idle cluster,
# gives a learner back when the second arrives, and the second starts at once with 1; whichever
# ends first, the other grows back to 2 (both changes in place: no learner restarts). Same model,
# data budget and seed in both runs.
# Prints each job's completion time (JCT, submission to COMPLETED), the sum, the makespan and the
# final accuracies; last line: JSON. ElasticDL reported 580 s elastic vs 795 s gang for its pair.
#
# Usage: bench/elastic_pair.sh [DELAY_S=10] [EPOCHS=3] [TRAIN_SAMPLES=20000]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
DELAY=${1:-10}; EPOCHS=${2:-3}; SAMPLES=${3:-20000}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
cat >"$WORK/nodes.yaml" <<YAML
nodes:
  - {name: node-a, cpus: 1, memory_mb: 8192}
  - {name: node-b, cpus: 1, memory_mb: 8192}
YAML

run() {  # run NAME LEARNERS -> appends one JSON line to $WORK/results
  local name=$1 learners=$2
  start_weftd "$WORK/$name" --config "$WORK/nodes.yaml"
  for job in first second; do
    cat >"$WORK/$name-$job.yaml" <<YAML
name: $job
model: {architecture: cnn}
data: {dataset: fashion-mnist, train_samples: $SAMPLES, test_samples: 2000}
training: {epochs: $EPOCHS, batch_size: 64, threads: 1, seed: 7}
resources: {learners: $learners, cpus: 1}
checkpoint: {every_seconds: 30}
YAML
  done
  python3 - "$BIN" "$WORK" "$name" "$DELAY" >>"$WORK/results" <<'PY'
import datetime, json, os, re, subprocess, sys, time, urllib.request
binp, work, name, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
server, token = os.environ["WEFT_SERVER"], os.environ["WEFT_TOKEN"]

def get(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req))

def submit(job):
    out = subprocess.run([f"{binp}/weft", "submit", f"{work}/{name}-{job}.yaml"], check=True,
                         capture_output=True, text=True).stdout
    return re.search(r"job (job-\S+) submitted", out).group(1)

def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

ids = {"first": submit("first")}
time.sleep(delay)
ids["second"] = submit("second")
while True:
    jobs = {k: get(f"/v1/jobs/{v}") for k, v in ids.items()}
    states = {k: j["state"] for k, j in jobs.items()}
    if all(s in ("COMPLETED", "FAILED") for s in states.values()):
        break
    time.sleep(0.5)
res = {"run": name}
for k, j in jobs.items():
    if j["state"] != "COMPLETED":
        raise SystemExit(f"{name}: job {k} {j['state']}: {j['reason']}")
    done = t(j["updated_at"])
    res[k] = {"jct_s": round(done - t(j["created_at"]), 1), "done": done,
              "attempts": j["attempt"], "accuracy": j["models"]["final"]["test_accuracy"],
              "samples": j["progress"]["samples"],
              "history": [e["reason"] for e in j["history"]]}
res["makespan_s"] = round(max(res[k]["done"] for k in ids) - t(jobs["first"]["created_at"]), 1)
print(json.dumps(res))
PY
  stop_weftd
}

echo "elastic pair: 2 nodes × 1 cpu, CNN on $SAMPLES samples × $EPOCHS epochs, second job ${DELAY} s after the first"
run fixed 2
run elastic "{min: 1, max: 2}"
python3 - "$WORK/results" <<'PY'
import json, re, sys
runs = {r["run"]: r for r in map(json.loads, open(sys.argv[1]))}
out = {}
for name in ("fixed", "elastic"):
    r = runs[name]
    total = r["first"]["jct_s"] + r["second"]["jct_s"]
    print(f"{name:8s} first {r['first']['jct_s']:7.1f} s ({r['first']['attempts']} attempt(s), "
          f"accuracy {r['first']['accuracy']:.4f}), second {r['second']['jct_s']:7.1f} s "
          f"(accuracy {r['second']['accuracy']:.4f}); sum {total:7.1f} s, makespan {r['makespan_s']:7.1f} s")
    for k in ("first", "second"):
        for h in r[k]["history"]:
            # A restart's resize starts with it; an in-place one is a generation.
            if h.startswith(("shrink", "grow")) or re.match(r"generation \d+: (shrink|grow)", h):
                print(f"         {k}: {h}")
    out[name] = {"first_jct_s": r["first"]["jct_s"], "second_jct_s": r["second"]["jct_s"],
                 "sum_jct_s": round(total, 1), "makespan_s": r["makespan_s"],
                 "first_accuracy": r["first"]["accuracy"], "second_accuracy": r["second"]["accuracy"],
                 "first_samples": r["first"]["samples"]}
out["sum_jct_ratio_elastic_over_fixed"] = round(out["elastic"]["sum_jct_s"] / out["fixed"]["sum_jct_s"], 3)
print(f"elastic / fixed, sum of JCTs: {out['sum_jct_ratio_elastic_over_fixed']:.3f}")
print(json.dumps(out))
PY
