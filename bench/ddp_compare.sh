#!/usr/bin/env bash
# weft's synchronous data parallelism against PyTorch's own, in the same run: the 2-conv CNN on
# all of Fashion-MNIST for one epoch, batch 64 per worker, Adam, 2 workers × 1 intra-op thread:
#   - weft: a `learners: 2` job under weftd (c10d ProcessGroupGloo allreduce, TCPStore rendezvous)
#   - torchrun + DDP: ../shared/reference/torchrun_fmnist_ddp.py under Debian's torchrun
#   - one bare libtorch thread (bench_bare_loop), the baseline both are scaled against
# alternating, REPEATS times each; prints the median samples/s of each and the ratios
# (goal: weft >= torchrun). weft's figure is wall-clock throughput between its first and last
# training metric points; torchrun's is the reference script's own per-epoch figure.
#
# Usage: bench/ddp_compare.sh [REPEATS=5] [STEPS_PER_WORKER=468]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
REPEATS=${1:-5}; STEPS=${2:-468}; BATCH=64; WORKERS=2
REF=${WEFT_REFERENCE:-$(pwd)/../shared/reference/torchrun_fmnist_ddp.py}
[ -f "$REF" ] || { echo "missing $REF (../shared beside the repo)" >&2; exit 1; }
command -v torchrun >/dev/null || { echo "torchrun not found (apt-get install python3-torch)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"

cat >"$WORK/job.yaml" <<YAML
name: ddp-compare
model: {architecture: cnn}
data: {train_samples: $((STEPS * BATCH * WORKERS)), test_samples: 1000}
training: {epochs: 1, batch_size: $BATCH, optimizer: adam, learning_rate: 0.001, threads: 1}
resources: {learners: $WORKERS, cpus: 1, memory_mb: 2048}
YAML

bare=(); weft=(); torch=()
for r in $(seq 1 "$REPEATS"); do
  b=$("$BIN/bench_bare_loop" cnn 1 "$BATCH" 200 | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')
  bare+=("$b")

  id=$(submit_and_wait "$WORK/job.yaml")
  w=$(curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id/metrics" | python3 -c '
import json, sys
pts = [p for p in json.load(sys.stdin)["points"] if "train_loss" in p]
a, b = pts[0], pts[-1]
print(round((b["step"] - a["step"]) * '"$BATCH * $WORKERS"' / (b["wall_time"] - a["wall_time"]), 1))')
  weft+=("$w")

  rm -rf "$WORK/ckpt" "$WORK/torchrun-logs"; mkdir -p "$WORK/ckpt"
  THREADS=1 OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=$WORKERS --redirects 1 --tee 1 \
      --log_dir "$WORK/torchrun-logs" "$REF" 1 "$WORK/ckpt" 1000000 >"$WORK/torchrun.out" 2>&1 ||
      { echo "torchrun failed:" >&2; tail -20 "$WORK/torchrun.out" >&2; exit 1; }
  t=$(python3 -c '
import json, re, sys
for line in open(sys.argv[1]):
    m = re.search(r"(\{.*\})", line)
    if m and "\"epoch\"" in m.group(1) and "samples_per_s" in m.group(1):
        print(json.loads(m.group(1))["samples_per_s"]); break' "$WORK/torchrun.out")
  torch+=("$t")
  echo "run $r: bare 1 thread $b samples/s, weft 2 learners $w samples/s, torchrun+DDP 2 workers $t samples/s"
done
python3 - "${bare[*]}" "${weft[*]}" "${torch[*]}" <<'PY'
import json, statistics, sys
bare, weft, torch = ([float(x) for x in a.split()] for a in sys.argv[1:4])
mb, mw, mt = statistics.median(bare), statistics.median(weft), statistics.median(torch)
# The machine's speed drifts over minutes; each repeat ran weft and torchrun back to back, so the
# median of the per-repeat ratios is the steadier comparison.
pair = statistics.median(w / t for w, t in zip(weft, torch))
print(f"median samples/s: bare libtorch 1 thread {mb:.0f}, weft 2 learners x 1 thread {mw:.0f} "
      f"({mw/mb:.2f}x bare), torchrun+DDP 2 x 1 thread {mt:.0f} ({mt/mb:.2f}x bare); "
      f"weft / torchrun {mw/mt:.3f}, median of per-repeat ratios {pair:.3f} (goal >= 1)")
print(json.dumps({"bench": "ddp_compare", "weft_samples_per_s": round(mw, 1),
                  "torchrun_samples_per_s": round(mt, 1), "bare_1_thread_samples_per_s": round(mb, 1),
                  "weft_over_torchrun": round(mw / mt, 4), "median_pair_ratio": round(pair, 4)}))
PY
