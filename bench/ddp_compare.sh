#!/usr/bin/env bash
# weft's synchronous data parallelism against PyTorch's own, in the same run: the 2-conv CNN on
# all of Fashion-MNIST for one epoch, batch 64 per worker, Adam, 2 workers × 1 intra-op thread:
#   - weft: a `learners: 2` job under weftd kept a gang on the one host (`gang_on_one_host:
#     learners`: c10d ProcessGroupGloo allreduce, TCPStore rendezvous), twice: with each layer on
#     the kernel its learner timed fastest (the default) and with WEFT_LEARNER_KERNELS=blas, every
#     layer a GEMM in the BLAS the learner loads (OpenBLAS)
#   - weft as a tenant gets it by default: the same `learners: 2` job, which on one host trains
#     as one learner with both threads at the gang's global batch of 128 (issue 19, item 4)
#   - torchrun + DDP: ../shared/reference/torchrun_fmnist_ddp.py under Debian's torchrun, twice:
#     with Debian's stock BLAS (netlib's reference BLAS behind nn.Linear) and with Debian's
#     OpenBLAS put on LD_LIBRARY_PATH for that command only (bench/lib.sh openblas_libdir) — the
#     anchor a PyTorch user who noticed would pick
#   - one bare libtorch thread (bench_bare_loop), with each of the two kernel settings: the
#     baselines the data-parallel figures are scaled against
# alternating, REPEATS times each; prints the median samples/s of each and the ratios
# (goal: weft >= torchrun). weft's figure is wall-clock throughput between its first and last
# training metric points; torchrun's is the reference script's own per-epoch figure.
#
# Usage: bench/ddp_compare.sh [REPEATS=3] [STEPS_PER_WORKER=468]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
REPEATS=${1:-3}; STEPS=${2:-468}; BATCH=64; WORKERS=2
REF=${WEFT_REFERENCE:-$(pwd)/../shared/reference/torchrun_fmnist_ddp.py}
[ -f "$REF" ] || { echo "missing $REF (../shared beside the repo)" >&2; exit 1; }
command -v torchrun >/dev/null || { echo "torchrun not found (apt-get install python3-torch)" >&2; exit 1; }
WORK=$(mktemp -d)
WEFTD_PID=
trap 'stop_weftd; rm -rf "$WORK"' EXIT
OPENBLAS=$(openblas_libdir)
echo "PyTorch's BLAS: stock $(torch_blas); anchor $(torch_blas "$OPENBLAS")"

cat >"$WORK/job.yaml" <<YAML
name: ddp-compare
model: {architecture: cnn}
data: {train_samples: $((STEPS * BATCH * WORKERS)), test_samples: 1000}
training: {epochs: 1, batch_size: $BATCH, optimizer: adam, learning_rate: 0.001, threads: 1}
resources: {learners: $WORKERS, cpus: 1, memory_mb: 2048, gang_on_one_host: SHAPE}
YAML

# bare KERNELS -> samples/s of one bare libtorch thread with WEFT_LEARNER_KERNELS=KERNELS
bare() {
  WEFT_LEARNER_KERNELS=$1 "$BIN/bench_bare_loop" cnn 1 "$BATCH" 200 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])'
}
# weft KERNELS RUN [SHAPE=learners] -> samples/s of the 2-learner job under a weftd whose
# learners get WEFT_LEARNER_KERNELS=KERNELS (auto: each learner times them), with
# resources.gang_on_one_host: SHAPE
weft() {
  local shape=${3:-learners} id
  WEFT_LEARNER_KERNELS=$1 start_weftd "$WORK/data-$2-$1-$shape"
  sed "s/SHAPE/$shape/" "$WORK/job.yaml" >"$WORK/job-$shape.yaml"
  id=$(submit_and_wait "$WORK/job-$shape.yaml")
  curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id/metrics" | python3 -c '
import json, sys
pts = [p for p in json.load(sys.stdin)["points"] if "train_loss" in p]
a, b = pts[0], pts[-1]
print(round((b["step"] - a["step"]) * '"$BATCH * $WORKERS"' / ((b["wall_time_ms"] - a["wall_time_ms"]) / 1000.0), 1))'
  stop_weftd
}

# torchrun_ddp LD_LIBRARY_PATH -> samples/s of the reference DDP script's epoch (2 workers x 1
# thread), with that library path for torchrun and its workers only
torchrun_ddp() {
  rm -rf "$WORK/ckpt" "$WORK/torchrun-logs"; mkdir -p "$WORK/ckpt"
  LD_LIBRARY_PATH="$1" THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 torchrun --standalone \
      --nproc_per_node=$WORKERS --redirects 1 --tee 1 --log_dir "$WORK/torchrun-logs" \
      "$REF" 1 "$WORK/ckpt" 1000000 >"$WORK/torchrun.out" 2>&1 ||
      { echo "torchrun failed:" >&2; tail -20 "$WORK/torchrun.out" >&2; exit 1; }
  python3 -c '
import json, re, sys
for line in open(sys.argv[1]):
    m = re.search(r"(\{.*\})", line)
    if m and "\"epoch\"" in m.group(1) and "samples_per_s" in m.group(1):
        print(json.loads(m.group(1))["samples_per_s"]); break' "$WORK/torchrun.out"
}

bare=(); bare_blas=(); weft=(); weft_blas=(); weft_one=(); torch=(); torch_ob=()
for r in $(seq 1 "$REPEATS"); do
  b=$(bare auto); bare+=("$b")
  bb=$(bare blas); bare_blas+=("$bb")
  w=$(weft auto "$r"); weft+=("$w")
  wb=$(weft blas "$r"); weft_blas+=("$wb")
  wo=$(weft auto "$r" one_learner); weft_one+=("$wo")

  t=$(torchrun_ddp ""); torch+=("$t")
  to=$(torchrun_ddp "$OPENBLAS"); torch_ob+=("$to")
  echo "run $r (samples/s): bare 1 thread $b (kernels per layer) / $bb (all BLAS);" \
       "weft 2 learners $w (kernels per layer) / $wb (all BLAS), as one learner $wo;" \
       "torchrun+DDP 2 workers $t (stock BLAS) / $to (OpenBLAS)"
done
python3 - "${bare[*]}" "${bare_blas[*]}" "${weft[*]}" "${weft_blas[*]}" "${torch[*]}" \
  "${torch_ob[*]}" "${weft_one[*]}" <<'PY'
import json, statistics, sys
bare, bare_blas, weft, weft_blas, torch, torch_ob, weft_one = (
    [float(x) for x in a.split()] for a in sys.argv[1:8])
med = statistics.median
mb, mbb, mw, mwb, mt, mto, mwo = (
    med(x) for x in (bare, bare_blas, weft, weft_blas, torch, torch_ob, weft_one))
# The machine's speed drifts over minutes; each repeat ran everything back to back, so the
# median of the per-repeat ratios is the steadier comparison.
pair = med(w / t for w, t in zip(weft, torch))
pair_blas = med(w / t for w, t in zip(weft_blas, torch))
pair_ob = med(w / t for w, t in zip(weft, torch_ob))
pair_one_ob = med(w / t for w, t in zip(weft_one, torch_ob))
print(f"median samples/s: bare libtorch 1 thread {mb:.0f} (kernels per layer) / {mbb:.0f} (all BLAS); "
      f"weft 2 learners x 1 thread {mw:.0f} ({mw/mb:.2f}x its bare thread), all BLAS "
      f"{mwb:.0f} ({mwb/mbb:.2f}x); torchrun+DDP 2 x 1 thread {mt:.0f} with the stock BLAS, "
      f"{mto:.0f} with OpenBLAS")
print(f"weft / torchrun, stock BLAS: {pair:.3f}; weft all BLAS / torchrun stock: "
      f"{pair_blas:.3f} (medians of per-repeat ratios; goal >= 1)")
print(f"weft / torchrun, OpenBLAS: {pair_ob:.3f} kept a gang; {pair_one_ob:.3f} as weft runs a "
      f"2-learner job on one host by default, one learner x 2 threads at batch 128 "
      f"({mwo:.0f} samples/s; issue 19's goal >= 1.25)")
print(json.dumps({"bench": "ddp_compare", "weft_samples_per_s": round(mw, 1),
                  "weft_blas_dense_samples_per_s": round(mwb, 1),
                  "weft_as_one_learner_samples_per_s": round(mwo, 1),
                  "torchrun_samples_per_s": round(mt, 1),
                  "torchrun_openblas_samples_per_s": round(mto, 1),
                  "bare_1_thread_samples_per_s": round(mb, 1),
                  "bare_1_thread_blas_dense_samples_per_s": round(mbb, 1),
                  "median_pair_ratio": round(pair, 4), "median_pair_ratio_blas_dense": round(pair_blas, 4),
                  "median_pair_ratio_openblas": round(pair_ob, 4),
                  "median_pair_ratio_as_one_learner_openblas": round(pair_one_ob, 4)}))
PY
