#!/usr/bin/env bash
# What a learner's container costs (issue 40): the same jobs under a weftd that runs every learner
# in a container (--runtime podman, the default) and under one that runs them on the host,
# unconfined (--runtime none: the path before containers), alternating, REPEATS times each.
#  - start: a one-learner MLP job (640 samples, one epoch), from its submission (the QUEUED entry
#    of its history) to its learner training (the learner's "training ..." log line): the
#    container's engine, its namespaces and the learner's libraries loading from the image.
#  - throughput: the example CNN (examples/fashion-mnist-cnn.yaml, one epoch of TRAIN_SAMPLES,
#    2 threads): the median of the samples/s its learner reports.
# Prints each run, the medians, the start the container adds per learner (goal <= 0.6 s) and the
# throughput ratio container / host (goal >= 0.98). Needs root and weft's runtime image
# (scripts/build-runtime-image.sh). Last line: JSON.
#
# Usage: bench/container_overhead.sh [REPEATS=5] [TRAIN_SAMPLES=12000]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
REPEATS=${1:-5}; SAMPLES=${2:-12000}
WORK=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT

# Two weftd, one per runtime: SERVER_<runtime> and TOKEN_<runtime>.
declare -A SERVER TOKEN
for rt in podman none; do
  start_weftd "$WORK/$rt" --runtime "$rt"
  PIDS+=("$WEFTD_PID")
  SERVER[$rt]=$WEFT_SERVER
  TOKEN[$rt]=$WEFT_TOKEN
done

cat >"$WORK/start.yaml" <<YAML
name: start
model: {architecture: mlp, hidden_units: [64]}
data: {train_samples: 640, test_samples: 100}
training: {epochs: 1, threads: 1}
resources: {cpus: 1, memory_mb: 1024}
YAML
cat >"$WORK/cnn.yaml" <<YAML
name: cnn
model: {architecture: cnn}
data: {dataset: fashion-mnist, train_samples: $SAMPLES, test_samples: 1000}
training: {epochs: 1, batch_size: 64, optimizer: adam, learning_rate: 0.001, threads: 2}
resources: {cpus: 2, memory_mb: 3072}
YAML

# run RUNTIME MANIFEST -> the job id, once it has ended (COMPLETED or the script stops)
run() {
  local out id state
  out=$(WEFT_SERVER=${SERVER[$1]} WEFT_TOKEN=${TOKEN[$1]} "$BIN/weft" submit "$2")
  id=$(echo "$out" | sed -n 's/^job \(job-[^ ]*\) submitted.*/\1/p')
  WEFT_SERVER=${SERVER[$1]} WEFT_TOKEN=${TOKEN[$1]} "$BIN/weft" follow "$id" >/dev/null || true
  state=$(WEFT_SERVER=${SERVER[$1]} WEFT_TOKEN=${TOKEN[$1]} "$BIN/weft" show "$id" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  [ "$state" = COMPLETED ] || { echo "job $id under $1 ended $state" >&2; exit 1; }
  echo "$id"
}
# start_seconds RUNTIME ID: submission -> the learner's "training" line
start_seconds() {
  python3 - "$WORK/$1/jobs/$2" "${SERVER[$1]}" "${TOKEN[$1]}" "$2" <<'PY'
import datetime, json, re, sys, urllib.request
job_dir, server, token, job = sys.argv[1:]
req = urllib.request.Request(f"http://{server}/v1/jobs/{job}", headers={"Authorization": f"Bearer {token}"})
history = json.load(urllib.request.urlopen(req))["history"]
submitted = datetime.datetime.fromisoformat(history[0]["time"].replace("Z", "+00:00"))
for line in open(job_dir + "/logs/learner-0.log"):
    m = re.match(r"(\S+) info learner: training ", line)
    if m:
        t = datetime.datetime.fromisoformat(m.group(1)).astimezone()
        print(f"{(t - submitted).total_seconds():.3f}")
        break
PY
}
# samples_per_s RUNTIME ID: the median of the learner's reported samples/s
samples_per_s() {
  curl -fsS -H "Authorization: Bearer ${TOKEN[$1]}" "http://${SERVER[$1]}/v1/jobs/$2/metrics" |
    python3 -c 'import json,statistics,sys; p=[x["samples_per_s"] for x in json.load(sys.stdin)["points"] if x.get("samples_per_s",0)>0]; print(f"{statistics.median(p):.1f}")'
}

declare -A STARTS RATES
for r in $(seq 1 "$REPEATS"); do
  for rt in podman none; do
    id=$(run "$rt" "$WORK/start.yaml")
    s=$(start_seconds "$rt" "$id")
    id=$(run "$rt" "$WORK/cnn.yaml")
    t=$(samples_per_s "$rt" "$id")
    STARTS[$rt]+="$s "
    RATES[$rt]+="$t "
    echo "run $r $rt: start $s s, CNN $t samples/s"
  done
done
python3 - "${STARTS[podman]}" "${STARTS[none]}" "${RATES[podman]}" "${RATES[none]}" "$SAMPLES" <<'PY'
import json, statistics, sys
sp, sn, rp, rn = ([float(x) for x in a.split()] for a in sys.argv[1:5])
msp, msn, mrp, mrn = (statistics.median(x) for x in (sp, sn, rp, rn))
print(f"start, submission -> training: container {msp:.2f} s, host {msn:.2f} s, "
      f"added {msp - msn:.2f} s per learner (goal <= 0.6 s)")
print(f"CNN throughput: container {mrp:.0f} samples/s, host {mrn:.0f} samples/s, "
      f"ratio {mrp / mrn:.3f} (goal >= 0.98)")
print(json.dumps({"bench": "container_overhead", "train_samples": int(sys.argv[5]),
                  "start_container_s": round(msp, 3), "start_host_s": round(msn, 3),
                  "start_added_s": round(msp - msn, 3), "container_samples_per_s": round(mrp, 1),
                  "host_samples_per_s": round(mrn, 1), "ratio": round(mrp / mrn, 4)}))
PY
