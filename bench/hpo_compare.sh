#!/usr/bin/env bash
# Hyperparameter search on weft (issue 44), on one machine in one run:
#   1. weft's ASHA against training every configuration fully on weft (searcher grid): the best
#      test accuracy found, the cpu-seconds the trials held (each trial's learner: 1 cpu, from
#      PLACED until it leaves RUNNING), the wall time, and the time to the deliver target;
#   2. against Optuna 3.1 (Debian's python3-optuna, bench/hpo_optuna.py) searching the same space
#      with SuccessiveHalvingPruner on the same 2 cores — with Debian's stock BLAS, and with
#      OpenBLAS on LD_LIBRARY_PATH for that run only (bench/lib.sh openblas_libdir);
#   3. two tenants' ASHA experiments at once: each tenant's share of the cpu-seconds held while
#      both ran (fair share: 0.5 each).
# The space: 16 configurations of MODEL on the first TRAIN training and 2,000 test images —
#   mlp: learning rate {1e-3, 3e-3, 1e-2, 3e-2} x batch size {32, 128} x hidden widths
#        {[64], [256, 64]};
#   cnn: learning rate {1e-3, 3e-3, 1e-2, 3e-2} x batch size {32, 64, 128, 256} (the CNN has no
#        width to search)
# — trained up to EPOCHS (9) epochs; ASHA with eta ETA (3; rungs of 1, 3, 9 epochs), 16 trials,
# 2 at once. Optuna's pruner gets the same eta and budget.
# An MLP epoch (under a second) costs less than a trial's start (its container, data and
# kernels: about 2 s), so the MLP measures the starts; the CNN's epochs (several seconds) are what
# a search on a real model pays for.
#
# Usage: bench/hpo_compare.sh [DELIVER] [TRAIN=30000] [MODEL=mlp] [ETA=3] [EPOCHS=9]; DELIVER
# defaults to 0.86 for the mlp, 0.88 for the cnn. EPOCHS is the grid's budget and ASHA's top
# rung: ETA 4 with EPOCHS 16 gives rungs of 1, 4 and 16 epochs (the eta of Li et al.'s
# experiments). The mlp on 30,000 images: about 15 minutes on 2 cores (most of it
# Optuna on the stock BLAS); the cnn on 12,000 (bench/hpo_compare.sh 0.88 12000 cnn): 25 to
# 35 minutes; `0.88 12000 cnn 4 16` about 42 (the grid 13 of them, Optuna's stock BLAS 16).
# Needs python3-torch, python3-numpy and python3-optuna (WEFT_WITH_BENCH_DEPS=1
# scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
MODEL=${3:-mlp}
[[ $MODEL == mlp || $MODEL == cnn ]] || { echo "MODEL: mlp or cnn, not '$MODEL'" >&2; exit 2; }
DELIVER=${1:-$([[ $MODEL == mlp ]] && echo 0.86 || echo 0.88)}
TRAIN=${2:-30000}
ETA=${4:-3}
EPOCHS=${5:-9}
[[ $ETA =~ ^[2-9]$ ]] || { echo "ETA: 2 to 9, not '$ETA'" >&2; exit 2; }
[[ $EPOCHS =~ ^[1-9][0-9]?$ ]] || { echo "EPOCHS: 1 to 99, not '$EPOCHS'" >&2; exit 2; }
# Optuna's side runs last: find out now, not after the weft runs, that it cannot.
/usr/bin/python3 -c 'import numpy, optuna, torch' 2>/dev/null || {
  echo "hpo_compare: needs python3-optuna, python3-torch and python3-numpy:" \
       "WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh" >&2
  exit 2
}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT

manifest() {  # manifest NAME SEARCHER SEED
  local extra=""
  [[ $2 == asha ]] && extra="  eta: $ETA
  min_resource: 1
  max_trials: 16"
  cat <<YAML
kind: Experiment
name: $1
job:
  model: {architecture: $MODEL$([[ $MODEL == mlp ]] && echo ", hidden_units: [64]")}
  data: {train_samples: $TRAIN, test_samples: 2000}
  training: {epochs: $EPOCHS, batch_size: 64, optimizer: adam, threads: 1}
  resources: {cpus: 1, memory_mb: 1024}
search:
  space:
    training.learning_rate: {choice: [0.001, 0.003, 0.01, 0.03]}
$(if [[ $MODEL == mlp ]]; then
    echo "    training.batch_size: {choice: [32, 128]}"
    echo "    model.hidden_units: {choice: [[64], [256, 64]]}"
  else
    echo "    training.batch_size: {choice: [32, 64, 128, 256]}"
  fi)
  searcher: $2
$extra
  max_concurrent_trials: 2
  seed: $3
targets: {deliver: $DELIVER}
YAML
}

submit() {  # submit FILE TOKEN -> the experiment's id
  WEFT_TOKEN=$2 "$BIN/weft" experiment submit "$1" | sed -n 's/^experiment \(exp-[^ ]*\) submitted.*/\1/p'
}

# save ID TOKEN OUT: the experiment and every trial's job, as the API shows them.
save() {
  python3 - "$WEFT_SERVER" "$2" "$1" "$3" <<'PY'
import json, sys, urllib.request
server, token, eid, out = sys.argv[1:]
def get(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req))
e = get(f"/v1/experiments/{eid}")
jobs = {t["job"]: get(f"/v1/jobs/{t['job']}") for t in e["trials"] if t["job"]}
json.dump({"experiment": e, "jobs": jobs}, open(out, "w"))
PY
}

start_weftd "$WORK/data"
ADMIN=$(cat "$WORK/data/admin.token")
manifest hpo-asha asha 11 >"$WORK/asha.yaml"
manifest hpo-grid grid 0 >"$WORK/grid.yaml"
# Each search in a tenant of its own: a tenant's jobs share their kernel choices, so a search
# run after another in the same tenant would not pay for timing them.
declare -A tok ids
for t in search-asha search-grid team-a team-b; do
  "$BIN/weft" --token "$ADMIN" tenant create "$t" >/dev/null
  tok[$t]=$("$BIN/weft" --token "$ADMIN" token create "$t" | tail -1)
done
for run in asha grid; do
  echo "weft: $run search ..."
  t=search-$run
  id=$(submit "$WORK/$run.yaml" "${tok[$t]}")
  WEFT_TOKEN=${tok[$t]} "$BIN/weft" experiment follow "$id" | tail -1
  save "$id" "${tok[$t]}" "$WORK/$run.json"
done
echo "weft: two tenants' ASHA searches at once ..."
for t in team-a team-b; do ids[$t]=$(submit "$WORK/asha.yaml" "${tok[$t]}"); done
for t in team-a team-b; do
  WEFT_TOKEN=${tok[$t]} "$BIN/weft" experiment follow "${ids[$t]}" | tail -1
  save "${ids[$t]}" "${tok[$t]}" "$WORK/$t.json"
done
stop_weftd

echo "optuna (stock BLAS) ..."
/usr/bin/python3 bench/hpo_optuna.py 16 "$EPOCHS" "$ETA" 2 11 "$DELIVER" "$TRAIN" 2000 "$MODEL" | tee "$WORK/optuna.json"
OPENBLAS=$(openblas_libdir)
echo "optuna with OpenBLAS ($(torch_blas "$OPENBLAS")) ..."
LD_LIBRARY_PATH="$OPENBLAS" OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/hpo_optuna.py 16 "$EPOCHS" "$ETA" 2 11 \
  "$DELIVER" "$TRAIN" 2000 "$MODEL" | tee "$WORK/optuna-openblas.json"

python3 - "$WORK" "$DELIVER" <<'PY'
import datetime, json, sys
w, deliver = sys.argv[1], float(sys.argv[2])
def ts(s): return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
HOLDING = {"PLACED", "STARTING", "RUNNING", "DELIVERED"}
def held(job):  # [(from, to)] while the job's learners held their cpus
    out, since = [], None
    for ev in job["history"]:
        t = ts(ev["time"])
        if ev["to"] in HOLDING and since is None: since = t
        elif ev["to"] not in HOLDING and since is not None: out.append((since, t)); since = None
    if since is not None: out.append((since, ts(job["updated_at"])))
    return out
def summary(name):
    d = json.load(open(f"{w}/{name}.json")); e = d["experiment"]
    cpus = {j: job["spec"]["resources"]["cpus"] for j, job in d["jobs"].items()}
    intervals = [(a, b, cpus[j]) for j, job in d["jobs"].items() for a, b in held(job)]
    start = ts(e["created_at"]); end = ts(e["updated_at"])
    scored = [(t["results"][-1], t) for t in e["trials"] if t["results"] and t["results"][-1] is not None]
    best, top = max(scored, key=lambda rt: rt[0], default=(None, None))
    dl = ts(e["deliver_met_at"]) - start if e["deliver_met_at"] else None
    return {"best": best, "cpu_s": sum((b - a) * c for a, b, c in intervals), "wall_s": end - start,
            "deliver_s": dl, "trials": len(e["trials"]), "intervals": intervals, "start": start, "end": end,
            "best_params": top["values"] if top else None, "best_epochs": top.get("epoch", 0) if top else 0}
def fmt(r): return (f"best {r['best']:.4f}  cpu-s {r['cpu_s']:7.1f}  wall {r['wall_s']:6.1f} s  "
                    f"to {deliver}: " + (f"{r['deliver_s']:.1f} s" if r['deliver_s'] is not None else "never"))
asha, grid = summary("asha"), summary("grid")
opt = [json.loads(open(f"{w}/{n}.json").read().strip().splitlines()[-1]) for n in ("optuna", "optuna-openblas")]
print("\n== weft ASHA against every configuration trained fully (grid), and Optuna ==")
print(f"weft ASHA  ({asha['trials']:2d} trials)        " + fmt(asha))
print(f"weft grid  ({grid['trials']:2d} trials)        " + fmt(grid))
for label, o in zip(("stock BLAS", "OpenBLAS  "), opt):
    print(f"Optuna SHA ({label}, {o['pruned']} pruned) " + fmt(o))
# Which configuration each search's best result came from, and after how many epochs.
for label, r in (("weft ASHA", asha), ("weft grid", grid), ("Optuna (stock BLAS)", opt[0]),
                 ("Optuna (OpenBLAS)", opt[1])):
    print(f"  {label} best: {json.dumps(r.get('best_params'), sort_keys=True)} after "
          f"{r.get('best_epochs', 0)} epochs")
print(f"ASHA vs grid: best {100 * (asha['best'] - grid['best']):+.2f} points, cpu-seconds ratio "
      f"{asha['cpu_s'] / grid['cpu_s']:.2f} (goal: within 0.5 point for <= 0.30)")
# Where ASHA's cpu-seconds go: each configuration's cost per epoch as the grid paid it (its whole
# held time over its epochs, its one start included), times the epochs ASHA trained it.
def by_config(name):  # {values: [epochs trained, cpu-s held, learner starts]}
    d = json.load(open(f"{w}/{name}.json")); out = {}
    for t in d["experiment"]["trials"]:
        if not t["job"]: continue
        job = d["jobs"][t["job"]]; cpus = job["spec"]["resources"]["cpus"]
        runs = held(job)
        out[json.dumps(t["values"], sort_keys=True)] = [t.get("epoch", 0), sum((b - a) * cpus for a, b in runs), len(runs)]
    return out
ac, gc = by_config("asha"), by_config("grid")
per_epoch = {k: c / max(1, e) for k, (e, c, _) in gc.items()}
if per_epoch:
    floor = sum(e * per_epoch[k] for k, (e, _, _) in ac.items() if k in per_epoch)
    print(f"ASHA: {sum(e for e, _, _ in ac.values())} epochs in {sum(n for _, _, n in ac.values())} learner starts; "
          f"grid: {sum(e for e, _, _ in gc.values())} epochs in {sum(n for _, _, n in gc.values())}")
    print(f"ASHA's epochs at the grid's cost per epoch of each configuration: {floor:.1f} cpu-s, "
          f"ratio {floor / grid['cpu_s']:.2f}; grid cost per epoch {min(per_epoch.values()):.1f}"
          f"..{max(per_epoch.values()):.1f} cpu-s by configuration")
    for k, (e, c, n) in sorted(ac.items(), key=lambda kv: -kv[1][0]):
        if e > 1: print(f"  ASHA trained {k} for {e} epochs ({n} starts): {c:.1f} cpu-s, the grid's "
                        f"cost per epoch x {e}: {e * per_epoch.get(k, float('nan')):.1f}")
for label, o in zip(("stock BLAS", "OpenBLAS"), opt):
    print(f"weft ASHA / Optuna ({label}): wall {asha['wall_s'] / o['wall_s']:.2f}, best "
          f"{100 * (asha['best'] - o['best']):+.2f} points" +
          (f", time to {deliver} {asha['deliver_s'] / o['deliver_s']:.2f}"
           if asha['deliver_s'] and o['deliver_s'] else ""))
a, b = summary("team-a"), summary("team-b")
lo, hi = max(a["start"], b["start"]), min(a["end"], b["end"])
def within(r):
    return sum(max(0.0, min(y, hi) - max(x, lo)) * c for x, y, c in r["intervals"])
ca, cb = within(a), within(b)
print(f"\n== two tenants' ASHA searches at once ({hi - lo:.1f} s together) ==")
print(f"team-a: {ca:6.1f} cpu-s ({ca / (ca + cb):.3f})   team-b: {cb:6.1f} cpu-s ({cb / (ca + cb):.3f})"
      f"   (fair share 0.5 each; goal within 10 %)")
print(f"team-a " + fmt(a)); print(f"team-b " + fmt(b))
PY
