#!/usr/bin/env bash
# Overhead of a command job: the example PyTorch program (examples/pytorch-command/train.py, the
# Fashion-MNIST CNN in Debian's PyTorch) run bare versus as a weft command job (one learner, in
# the sandbox, its metrics lines read and reported by weft-learner), alternating, REPEATS times
# each. The figure is the program's own samples/s over its last epoch, so both sides measure the
# same loop; prints the medians and their ratio (goal >= 0.98).
#
# Usage: bench/command_overhead.sh [THREADS=1] [TRAIN_SAMPLES=19200] [EPOCHS=2] [REPEATS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
THREADS=${1:-1}; SAMPLES=${2:-19200}; EPOCHS=${3:-2}; REPEATS=${4:-3}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"
ARGS=(--epochs "$EPOCHS" --train-samples "$SAMPLES" --test-samples 1000 --checkpoint-steps 100000)
mkdir -p "$WORK/bare"
cp examples/pytorch-command/train.py sdk/python/weft_job.py "$WORK/bare/"
tar -czf "$WORK/code.tar.gz" -C examples/pytorch-command train.py -C ../../sdk/python weft_job.py
"$BIN/weft" artifact upload "$WORK/code.tar.gz" --name bench-code >/dev/null
{
  echo "name: command-overhead"
  printf 'command: [python3, train.py'; printf ', "%s"' "${ARGS[@]}"; echo "]"
  echo "code: bench-code"
  echo "data: {dataset: fashion-mnist}"
  echo "resources: {cpus: $THREADS, memory_mb: 4096}"
} >"$WORK/job.yaml"

last_rate() { sed -n 's/.*rank 0: epoch [0-9]* .* samples\/s \([0-9.]*\).*/\1/p' | tail -1; }
bare=(); weft=()
for r in $(seq 1 "$REPEATS"); do
  b=$(cd "$WORK/bare" && OMP_NUM_THREADS=$THREADS /usr/bin/python3 train.py "${ARGS[@]}" | last_rate)
  bare+=("$b")
  id=$(submit_and_wait "$WORK/job.yaml")
  w=$("$BIN/weft" logs "$id" | last_rate)
  state=$("$BIN/weft" show "$id" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  [ "$state" = COMPLETED ] || { echo "job $id ended $state"; "$BIN/weft" logs "$id" | tail; exit 1; }
  weft+=("$w")
  echo "run $r: bare $b samples/s, command job $w samples/s"
done
python3 - "${bare[*]}" "${weft[*]}" "$THREADS" "$SAMPLES" <<'PY'
import json, statistics, sys
bare = [float(x) for x in sys.argv[1].split()]; weft = [float(x) for x in sys.argv[2].split()]
mb, mw = statistics.median(bare), statistics.median(weft)
print(f"median: bare python3 train.py {mb:.0f} samples/s, as a weft command job {mw:.0f} samples/s, "
      f"ratio {mw/mb:.3f} (goal >= 0.98)")
print(json.dumps({"bench": "command_overhead", "threads": int(sys.argv[3]), "train_samples": int(sys.argv[4]),
                  "command_job_samples_per_s": round(mw, 1), "bare_samples_per_s": round(mb, 1),
                  "ratio": round(mw / mb, 4)}))
PY
