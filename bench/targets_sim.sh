#!/usr/bin/env bash
# Target-aware scheduling in weft-sim (issue 16): the Pollux OSDI'21 artifact's workloads 1-8 at
# loads 0.5 / 1.0 / 1.5 / 2.0 under fifo, tiresias, goodput and targets, each job with the
# two-tier targets of docs/simulation.md ("Targets": deliver = its application's metric at 60 %
# of its progress). Prints, per load, each policy's mean time to delivery and mean JCT (over the
# 8 workloads) and targets' ratios to the others; the goals are time to delivery <= 0.52 x fifo's
# (TRADL's 48.2 %) and below goodput's, with the JCT within 5 % of the best policy's.
# Ends with one JSON line. Traces from $WEFT_TRACES or ../shared/traces.
#
# Usage: bench/targets_sim.sh [OUT_DIR=sim-results/targets]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${WEFT_BIN:-$PWD/build/bin}"
TRACES="${WEFT_TRACES:-$PWD/../shared/traces}"
OUT="${1:-sim-results/targets}"
P="$TRACES/pollux"
[ -d "$P/app-traces" ] || { echo "no traces at $P (set WEFT_TRACES)" >&2; exit 2; }
mkdir -p "$OUT"
: >"$OUT/means.txt"
for load in 0.5 1.0 1.5 2.0; do
  dir="$P/workloads"; [ "$load" = 1.0 ] || dir="$P/workloads-$load"
  for pol in fifo tiresias goodput targets; do
    start=$(date +%s.%N)
    line=$("$BIN/weft-sim" -q --policy "$pol" --workloads "$dir" --app-traces "$P/app-traces" \
             --out "$OUT/$load" | tail -1)
    secs=$(python3 -c "import time; print(f'{time.time()-$start:.1f}')")
    echo "$line" | python3 -c "import json,sys; d=json.load(sys.stdin); print('$pol', '$load', d['mean_time_to_deliver'], d['mean_jct'])" >>"$OUT/means.txt"
    echo "   $pol at ${load}x simulated in $secs s" >&2
  done
done
python3 - "$OUT/means.txt" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    pol, load, deliver, jct = line.split()
    rows[(pol, load)] = (float(deliver), float(jct))
policies = ["fifo", "tiresias", "goodput", "targets"]
summary = {}
print("load  policy     time to delivery s   mean JCT s   targets' delivery ratio   targets' JCT ratio")
for load in ["0.5", "1.0", "1.5", "2.0"]:
    t_del, t_jct = rows[("targets", load)]
    best_jct = min(rows[(p, load)][1] for p in policies if p != "targets")
    for p in policies:
        d, j = rows[(p, load)]
        ratio = "" if p == "targets" else f"{t_del / d:10.3f}"
        jratio = "" if p == "targets" else f"{t_jct / j:10.3f}"
        print(f"{load:4}  {p:9} {d:18.1f} {j:12.1f}   {ratio:>22}   {jratio:>17}")
    summary[load] = {
        "time_to_deliver": {p: round(rows[(p, load)][0], 1) for p in policies},
        "jct": {p: round(rows[(p, load)][1], 1) for p in policies},
        "deliver_vs_fifo": round(t_del / rows[("fifo", load)][0], 3),
        "deliver_vs_goodput": round(t_del / rows[("goodput", load)][0], 3),
        "jct_vs_best_other": round(t_jct / best_jct, 3),
        "goals_met": t_del <= 0.52 * rows[("fifo", load)][0] and t_del < rows[("goodput", load)][0]
                     and t_jct <= 1.05 * best_jct,
    }
print(json.dumps({"bench": "targets_sim", "loads": summary}))
PY
