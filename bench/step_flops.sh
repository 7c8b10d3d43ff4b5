#!/usr/bin/env bash
# Distance to the hardware (issue 19): bench_step_flops at 1 and 2 threads. Each run prints the rate
# of a 1024^3 float GEMM with torch::mm (on the BLAS weft-learner loads: OpenBLAS, from its run
# path) and with oneDNN, and the achieved FLOP/s of a training step of weft's CNN and MLP (batch
# 64, Adam, each layer on the kernel the learner would pick; FLOPs counted analytically) and its
# fraction of the faster GEMM — the peak these cores reach. The goal is a step at >= 80 % of that
# peak. Ends with one JSON line.
#
# Usage: bench/step_flops.sh [SECONDS_PER_MEASUREMENT=3]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
SECONDS_EACH=${1:-3}
: >"${TMPDIR:-/tmp}/step_flops.$$"
for threads in 1 2; do
  echo "--- $threads thread(s)"
  OPENBLAS_NUM_THREADS=$threads "$BIN/bench_step_flops" "$threads" 64 "$SECONDS_EACH" 2>/dev/null |
    tee /dev/stderr | tail -1 >>"${TMPDIR:-/tmp}/step_flops.$$"
done 2>&1
python3 - "${TMPDIR:-/tmp}/step_flops.$$" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'threads':>7} {'GEMM mm':>9} {'GEMM oneDNN':>11} {'peak':>7} "
      f"{'CNN GFLOP/s':>11} {'of peak':>7} {'MLP GFLOP/s':>11} {'of peak':>7}")
summary = {}
for r in runs:
    peak = max(r["gemm_gflops"].values())
    print(f"{r['threads']:>7} {r['gemm_gflops']['blas']:>9.1f} {r['gemm_gflops']['onednn']:>11.1f} "
          f"{peak:>7.1f} {r['cnn']['gflops']:>11.1f} {r['cnn']['gflops'] / peak:>7.0%} "
          f"{r['mlp']['gflops']:>11.1f} {r['mlp']['gflops'] / peak:>7.0%}")
    summary[f"{r['threads']}_threads"] = {"peak_gflops": round(peak, 1),
                                          "cnn_fraction": round(r["cnn"]["gflops"] / peak, 3),
                                          "mlp_fraction": round(r["mlp"]["gflops"] / peak, 3)}
print(json.dumps({"bench": "step_flops", "runs": runs, "summary": summary}))
PY
rm -f "${TMPDIR:-/tmp}/step_flops.$$"
