#!/usr/bin/env bash
# weft-sim against the Pollux OSDI'21 artifact, in one run:
#  1. mean JCT of fifo, tiresias, optimus, goodput and fairshare (rigid gangs, and every job
#     elastic) on the artifact's workloads 1–8 at loads 0.5 / 1.0 / 1.5 / 2.0, next to the
#     published Pollux, Tiresias and Optimus+Oracle means, with the ratio of each of ours to the
#     published one of the same policy, and fairshare's elastic / rigid;
#  2. the Philly replay: all 82,247 jobs of philly.csv with fifo and tiresias on a cluster sized
#     from the trace (8 GPUs per node), wall time of each (goal < 60 s);
#  3. one scheduling round of every policy at 1k jobs × 512 nodes and 10k jobs × 2k nodes
#     (bench_sched_round, goals ≤ 10 ms and ≤ 100 ms);
#  4. plots at 1.0x: JCT CDF of every policy and GPUs allocated over time (gnuplot).
# Ends with one JSON line. Traces from $WEFT_TRACES or ../shared/traces.
#
# Usage: bench/sim_compare.sh [OUT_DIR=sim-results]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${WEFT_BIN:-$PWD/build/bin}"
TRACES="${WEFT_TRACES:-$PWD/../shared/traces}"
OUT="${1:-sim-results}"
P="$TRACES/pollux"
[ -d "$P/app-traces" ] || { echo "no traces at $P (set WEFT_TRACES)" >&2; exit 2; }
mkdir -p "$OUT"

# fairshare-elastic: weft's fair-share policy with every job elastic (weft-sim --elastic).
policies=(fifo tiresias optimus goodput fairshare fairshare-elastic)
loads=(0.5 1.0 1.5 2.0)
: >"$OUT/means.txt"
echo "== 1. mean JCT (s) on workloads 1-8, 16 nodes x 4 GPUs, 60 s rounds"
for pol in "${policies[@]}"; do
  for load in "${loads[@]}"; do
    dir="$P/workloads"; [ "$load" = 1.0 ] || dir="$P/workloads-$load"
    extra=(); [ "$load" = 1.0 ] && extra=(--plot)
    out="$OUT/$load"; policy=$pol
    if [ "$pol" = fairshare-elastic ]; then policy=fairshare; out="$OUT/$load-elastic"; extra+=(--elastic); fi
    start=$(date +%s.%N)
    line=$("$BIN/weft-sim" -q --policy "$policy" --workloads "$dir" --app-traces "$P/app-traces" \
             --out "$out" "${extra[@]}" | tail -1)
    secs=$(python3 -c "import time; print(f'{time.time()-$start:.1f}')")
    m=$(echo "$line" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["mean_jct"],1))')
    echo "$pol $load $m" >>"$OUT/means.txt"
    echo "   $pol $load: $m s (simulated in $secs s)" >&2
  done
done
python3 - "$P/results" "$OUT/means.txt" "$OUT/mean-jct.json" <<'PY'
import json, sys
res = sys.argv[1]
ours = {}
for line in open(sys.argv[2]):
    pol, load, v = line.split()
    ours[(pol, load)] = float(v)
loads = ["0.5", "1.0", "1.5", "2.0"]
pub = {p: {l: json.load(open(f"{res}/{p}-{l}.json"))["mean"] for l in loads} for p in ["pollux", "tiresias", "optimus"]}
print(f"{'policy':<23}" + "".join(f"{l + 'x':>12}" for l in loads))
for pol in ["fifo", "tiresias", "optimus", "goodput", "fairshare", "fairshare-elastic"]:
    print(f"{'weft ' + pol:<23}" + "".join(f"{ours[(pol, l)]:>12,.1f}" for l in loads))
for p in ["pollux", "tiresias", "optimus"]:
    print(f"{'published ' + p:<23}" + "".join(f"{pub[p][l]:>12,.1f}" for l in loads))
print()
for pol in ["tiresias", "optimus"]:
    print(f"{pol} / published {pol}: " + "  ".join(f"{l}x {ours[(pol, l)] / pub[pol][l]:.4f}" for l in loads))
print("goodput / published pollux: " + "  ".join(f"{l}x {ours[('goodput', l)] / pub['pollux'][l]:.4f}" for l in loads))
print("fairshare elastic / rigid: " + "  ".join(f"{l}x {ours[('fairshare-elastic', l)] / ours[('fairshare', l)]:.4f}" for l in loads))
json.dump({"ours": {f"{k[0]}-{k[1]}": v for k, v in ours.items()},
           "published": {f"{p}-{l}": pub[p][l] for p in pub for l in loads}}, open(sys.argv[3], "w"))
PY

echo
echo "== 2. Philly replay: philly.csv, cluster sized from the trace"
declare -A philly
for pol in fifo tiresias; do
  start=$(date +%s.%N)
  "$BIN/weft-sim" --policy "$pol" --workloads "$P/philly.csv" --nodes 0 --gpus-per-node 8 \
      --out "$OUT/philly" >"$OUT/philly-$pol.txt" 2>"$OUT/philly-$pol.err"
  secs=$(python3 -c "import time; print(f'{time.time()-$start:.1f}')")
  philly[$pol]=$secs
  head -1 "$OUT/philly-$pol.err"
  tail -3 "$OUT/philly-$pol.txt" | head -2
  echo "   $pol: replayed in $secs s wall (goal < 60 s)"
done

echo
echo "== 3. one scheduling round (Google Benchmark)"
"$BIN/bench_sched_round" --benchmark_format=console 2>/dev/null | grep -E "^(BM_|Benchmark|---)" | tee "$OUT/sched-round.txt"

echo
echo "== 4. plots"
files=()
for pol in "${policies[@]}"; do
  dat="$OUT/1.0/$pol-jct.dat"; [ "$pol" = fairshare-elastic ] && dat="$OUT/1.0-elastic/fairshare-jct.dat"
  files+=("'$dat' using 1:2 with steps title '$pol'")
done
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,500
set output '$OUT/jct-cdf-1.0.png'
set logscale x; set grid; set key bottom right
set xlabel 'JCT (s), workloads 1-8 at 1.0x'; set ylabel 'fraction of jobs'
plot $(IFS=,; echo "${files[*]}")
GP
  echo "   $OUT/jct-cdf-1.0.png, $OUT/1.0/<policy>-allocation.png"
else
  echo "   gnuplot not installed: no plots"
fi

python3 - "$OUT" "${philly[fifo]}" "${philly[tiresias]}" <<'PY'
import json, sys
out, fifo_s, tir_s = sys.argv[1:]
m = json.load(open(f"{out}/mean-jct.json"))
m["philly_replay_seconds"] = {"fifo": float(fifo_s), "tiresias": float(tir_s)}
print(json.dumps(m))
PY
