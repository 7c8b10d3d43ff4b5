#!/usr/bin/env bash
# Overhead of running under weft: the same model, data, batch size, threads and number of steps
# trained by weft-learner under weftd versus a bare libtorch loop (bench_bare_loop), alternating,
# REPEATS times each; prints the median samples/s of each and their ratio (goal >= 0.98).
# weft's figure is wall-clock throughput between its first and last training metric points, so
# everything the learner does besides training (reporting, gRPC) counts against it.
#
# Usage: bench/overhead.sh [ARCH=cnn] [THREADS=2] [STEPS=600] [REPEATS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
ARCH=${1:-cnn}; THREADS=${2:-2}; STEPS=${3:-600}; REPEATS=${4:-3}; BATCH=64
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"

cat >"$WORK/job.yaml" <<YAML
name: overhead
model: {architecture: $ARCH$( [ "$ARCH" = mlp ] && echo ", hidden_units: [256, 128]")}
data: {train_samples: $((STEPS * BATCH)), test_samples: 1000}
training: {epochs: 1, batch_size: $BATCH, optimizer: adam, learning_rate: 0.001, threads: $THREADS}
resources: {cpus: $THREADS, memory_mb: 2048}
YAML

bare=(); weft=()
for r in $(seq 1 "$REPEATS"); do
  b=$("$BIN/bench_bare_loop" "$ARCH" "$THREADS" "$BATCH" "$STEPS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')
  bare+=("$b")
  id=$(submit_and_wait "$WORK/job.yaml")
  w=$(curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id/metrics" | python3 -c '
import json, sys
pts = [p for p in json.load(sys.stdin)["points"] if "train_loss" in p]
a, b = pts[0], pts[-1]
print(round((b["step"] - a["step"]) * '"$BATCH"' / ((b["wall_time_ms"] - a["wall_time_ms"]) / 1000.0), 1))')
  weft+=("$w")
  echo "run $r: bare $b samples/s, weft $w samples/s"
done
python3 - "${bare[*]}" "${weft[*]}" "$ARCH" "$THREADS" "$STEPS" <<'PY'
import json, statistics, sys
bare = [float(x) for x in sys.argv[1].split()]; weft = [float(x) for x in sys.argv[2].split()]
mb, mw = statistics.median(bare), statistics.median(weft)
print(f"median: bare libtorch {mb:.0f} samples/s, weft-learner under weftd {mw:.0f} samples/s, ratio {mw/mb:.3f} (goal >= 0.98)")
print(json.dumps({"bench": "overhead", "arch": sys.argv[3], "threads": int(sys.argv[4]), "steps": int(sys.argv[5]),
                  "weft_samples_per_s": round(mw, 1), "bare_samples_per_s": round(mb, 1), "ratio": round(mw / mb, 4)}))
PY
