#!/usr/bin/env bash
# Time to 0.90 and 0.91 test accuracy of examples/fashion-mnist-cnn.yaml under weft, against
# ../shared/reference/pytorch_fmnist_cnn.py (the same 2-conv model, Adam 1e-3, batch 64, in
# Debian's PyTorch) on the same cores in the same run — twice: with Debian's stock BLAS, and with
# Debian's OpenBLAS on LD_LIBRARY_PATH for that run only (bench/lib.sh openblas_libdir), the
# anchor a PyTorch user would pick. weft's clock starts when its learner registers (data loading
# included); PyTorch's after its data is loaded.
#
# Usage: bench/time_to_accuracy.sh [THREADS=2] [PYTORCH_EPOCHS=8]
# Needs python3-torch and python3-numpy (WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
THREADS=${1:-2}; EPOCHS=${2:-8}
REF=${WEFT_REFERENCE:-../shared/reference/pytorch_fmnist_cnn.py}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"

sed "s/threads: 2/threads: $THREADS/" examples/fashion-mnist-cnn.yaml >"$WORK/cnn.yaml"
echo "weft: training examples/fashion-mnist-cnn.yaml ..."
id=$(submit_and_wait "$WORK/cnn.yaml")
curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id" >"$WORK/job.json"
curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id/metrics" >"$WORK/metrics.json"
stop_weftd

echo "pytorch: $REF $THREADS $EPOCHS ..."
/usr/bin/python3 "$REF" "$THREADS" "$EPOCHS" | tee "$WORK/pytorch.txt"
OPENBLAS=$(openblas_libdir)
echo "pytorch with OpenBLAS ($(torch_blas "$OPENBLAS")): $REF $THREADS $EPOCHS ..."
LD_LIBRARY_PATH="$OPENBLAS" OPENBLAS_NUM_THREADS="$THREADS" /usr/bin/python3 "$REF" "$THREADS" "$EPOCHS" |
  tee "$WORK/pytorch-openblas.txt"

python3 - "$WORK" <<'PY'
import json, re, sys, datetime
w = sys.argv[1]
job = json.load(open(f"{w}/job.json")); pts = json.load(open(f"{w}/metrics.json"))["points"]
def ts(s): return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
running = next(ts(e["time"]) for e in job["history"] if e["to"] == "RUNNING")
hit = {}
for p in pts:
    if "test_accuracy" in p:
        for th in (0.88, 0.90, 0.91):
            if p["test_accuracy"] >= th and th not in hit: hit[th] = p["wall_time_ms"] / 1000.0 - running
sps = [p["samples_per_s"] for p in pts if "samples_per_s" in p]
weft_sps = sorted(sps)[len(sps) // 2]
def reference(name):
    txt = open(f"{w}/{name}").read()
    times = {float(k): float(v) for k, v in re.findall(r"([0-9.]+): ([0-9.]+)", txt.split("time_to_acc")[-1])}
    sps = sorted(float(x) for x in re.findall(r"samples/s (\d+)", txt))
    return times, sps[len(sps) // 2]
ref, ref_med = reference("pytorch.txt")
ob, ob_med = reference("pytorch-openblas.txt")
print(f"{'':24}{'weft':>10}{'pytorch':>10}{'+OpenBLAS':>11}{'weft/OpenBLAS':>15}")
for th in (0.88, 0.90, 0.91):
    a = f"{hit[th]:.1f}s" if th in hit else "-"; b = f"{ref[th]:.1f}s" if th in ref else "-"
    c = f"{ob[th]:.1f}s" if th in ob else "-"
    r = f"{hit[th] / ob[th]:.2f}" if th in hit and th in ob else "-"
    print(f"time to {th:.2f} accuracy  {a:>10}{b:>10}{c:>11}{r:>15}")
print(f"{'median samples/s':24}{weft_sps:>10.0f}{ref_med:>10.0f}{ob_med:>11.0f}")
print(f"weft job: {job['state']} ({job['reason']}), final test_accuracy {job['models'].get('final', {}).get('test_accuracy')}")
print(json.dumps({"bench": "time_to_accuracy", "weft_s": {str(k): round(v, 1) for k, v in hit.items()},
                  "pytorch_s": {str(k): v for k, v in ref.items()},
                  "pytorch_openblas_s": {str(k): v for k, v in ob.items()},
                  "weft_over_pytorch_openblas": {str(k): round(hit[k] / ob[k], 3) for k in hit if k in ob},
                  "weft_samples_per_s": round(weft_sps), "pytorch_samples_per_s": ref_med,
                  "pytorch_openblas_samples_per_s": ob_med,
                  "final_test_accuracy": job["models"].get("final", {}).get("test_accuracy")}))
PY
