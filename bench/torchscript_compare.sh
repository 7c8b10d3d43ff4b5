#!/usr/bin/env bash
# The built-ins as TorchScript versus the same layers as a plain nn::Module (how weft-learner
# defined them before): the same bare training loop (bench_bare_loop), initialisation, data, batch,
# threads and steps, alternating, REPEATS times each; prints the median samples/s of each and
# their ratio (goal >= 0.98).
#
# Usage: bench/torchscript_compare.sh [ARCH=cnn] [THREADS=1] [STEPS=300] [REPEATS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
ARCH=${1:-cnn}; THREADS=${2:-1}; STEPS=${3:-300}; REPEATS=${4:-5}; BATCH=64
rate() { "$BIN/bench_bare_loop" "$1" "$THREADS" "$BATCH" "$STEPS" 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])'; }
module=(); script=()
for r in $(seq 1 "$REPEATS"); do
  m=$(rate "$ARCH-module"); t=$(rate "$ARCH")
  module+=("$m"); script+=("$t")
  echo "run $r: nn::Module $m samples/s, TorchScript $t samples/s"
done
python3 - "${module[*]}" "${script[*]}" "$ARCH" "$THREADS" "$STEPS" <<'PY'
import json, statistics, sys
module = [float(x) for x in sys.argv[1].split()]; script = [float(x) for x in sys.argv[2].split()]
mm, ms = statistics.median(module), statistics.median(script)
paired = statistics.median(t / m for m, t in zip(module, script))
print(f"median: nn::Module {mm:.0f} samples/s, TorchScript {ms:.0f} samples/s, ratio {ms/mm:.3f}; "
      f"median of the runs' ratios {paired:.3f} (goal >= 0.98)")
print(json.dumps({"bench": "torchscript_compare", "arch": sys.argv[3], "threads": int(sys.argv[4]),
                  "steps": int(sys.argv[5]), "torchscript_samples_per_s": round(ms, 1),
                  "module_samples_per_s": round(mm, 1), "ratio": round(ms / mm, 4),
                  "median_run_ratio": round(paired, 4)}))
PY
