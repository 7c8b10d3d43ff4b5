#!/usr/bin/env bash
# Learners per host (issue 19, item 4): on one host with 2 cores, is a job faster as one learner
# with 2 intra-op threads or as a gang of 2 learners × 1 thread? Same model, same data, same
# global batch (so the same training up to float rounding: the gang's ranks split each step's
# block of samples, and their mean gradient is the block's), one epoch each, under weftd,
# alternating, REPEATS times:
#   one-wide  learners: 1, cpus: 2, threads: 2, batch_size: B
#   gang      learners: 2, cpus: 1, threads: 1, batch_size: B/2, gang_on_one_host: learners
#   default   learners: 2, cpus: 1, threads: 1, batch_size: B/2: the gang as weft runs it on one
#             host by default since issue 19's item 4, as one learner (it should match one-wide)
# for B = 64 and B = 128, for the CNN (1 epoch) and the MLP (4 epochs). Prints the median samples/s of each shape (wall
# clock between the first and last training metric points) and gang / one-wide.
#
# Usage: bench/learners_per_host.sh [REPEATS=2] [TRAIN_SAMPLES=30000] [MODELS="cnn mlp"]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
REPEATS=${1:-2}; SAMPLES=${2:-30000}; MODELS=${3:-cnn mlp}
WORK=$(mktemp -d)
WEFTD_PID=
trap 'stop_weftd; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"

# run MODEL LEARNERS BATCH [SHAPE=learners] -> samples/s of one epoch of MODEL with LEARNERS
# learners on 2 cores, with resources.gang_on_one_host: SHAPE
run() {
  local model=$1 learners=$2 batch=$3 shape=${4:-learners} arch threads=$((2 / $2)) epochs=1
  arch="{architecture: cnn}"
  # The MLP trains about 4 times faster: 4 epochs, so that its metric points span seconds.
  [ "$model" = mlp ] && arch="{architecture: mlp, hidden_units: [256, 128]}" && epochs=4
  cat >"$WORK/job.yaml" <<YAML
name: shape-$model-$learners-$batch-${shape//_/-}
model: $arch
data: {train_samples: $SAMPLES, test_samples: 1000}
training: {epochs: $epochs, batch_size: $batch, optimizer: adam, learning_rate: 0.001, threads: $threads, lr_scaling: none}
resources: {learners: $learners, cpus: $threads, memory_mb: 2048, gang_on_one_host: $shape}
YAML
  local id
  id=$(submit_and_wait "$WORK/job.yaml")
  curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id/metrics" |
    python3 -c '
import json, sys
pts = [p for p in json.load(sys.stdin)["points"] if "train_loss" in p]
a, b = pts[0], pts[-1]
print(round((b["step"] - a["step"]) * '"$batch * $learners"' / ((b["wall_time_ms"] - a["wall_time_ms"]) / 1000.0), 1))'
}

declare -A fig
for ((r = 1; r <= REPEATS; r++)); do
  for model in $MODELS; do
    for B in 64 128; do
      wide=$(run "$model" 1 "$B"); gang=$(run "$model" 2 $((B / 2)))
      one=$(run "$model" 2 $((B / 2)) one_learner)
      echo "repeat $r $model global batch $B: one learner x 2 threads $wide, 2 learners x 1 thread $gang," \
        "2 learners by default (as one) $one samples/s"
      fig[$model-$B-wide]+="$wide "; fig[$model-$B-gang]+="$gang "; fig[$model-$B-one]+="$one "
    done
  done
done
for model in $MODELS; do
  for B in 64 128; do
    python3 - "$model" "$B" "${fig[$model-$B-wide]}" "${fig[$model-$B-gang]}" \
      "${fig[$model-$B-one]}" <<'PY'
import json, statistics, sys
model, b = sys.argv[1], int(sys.argv[2])
w, g, o = (statistics.median(map(float, a.split())) for a in sys.argv[3:6])
print(f"{model} global batch {b}: one learner x 2 threads {w:.0f}, 2 learners x 1 thread {g:.0f}, "
      f"2 learners as weft runs them by default {o:.0f} samples/s; gang / one-wide {g / w:.3f}, "
      f"default / one-wide {o / w:.3f}, default / gang {o / g:.3f}")
print(json.dumps({"bench": "learners_per_host", "model": model, "global_batch": b,
                  "one_wide_samples_per_s": w, "gang_samples_per_s": g,
                  "default_samples_per_s": o, "ratio": round(g / w, 3),
                  "default_over_gang": round(o / g, 3)}))
PY
  done
done
