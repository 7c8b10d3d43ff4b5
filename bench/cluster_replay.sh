#!/usr/bin/env bash
# A Pollux workload replayed on real learners (issue 46): the first JOBS jobs of WORKLOAD, scaled
# down by weft-replay (src/sim/replay.h, docs/simulation.md "Live replay") to built-in
# Fashion-MNIST jobs, submitted at their scaled arrival times to a real weftd on NODES logical
# nodes of 0.5 cpu (two to a core, pinned; each learner's container capped at its 0.5 cpu), once
# per RUN: fixed gangs under fifo and fairshare, elastic jobs under fairshare, goodput and targets.
#  1. profile: one gang of NODES learners per model (CNN, MLP) trains MAX_EPOCHS epochs on the
#     busy cluster; its seconds per epoch × learners and its accuracy after each epoch are the
#     profiles weft-replay sizes budgets and targets with; gangs of each smaller power of two
#     train 2 epochs, as many at once as fill the nodes, for the learner-seconds per epoch at each
#     world size; every profiled job's time beyond its epochs is the model's start cost;
#  2. plan: weft-replay writes the fixed and the elastic manifests;
#  3. each run on a fresh weftd: submits every job at its time and samples the jobs' learners
#     every 0.5 s (allocated cpu-seconds); at the end reads each job's history.
# Per run: mean and p95 JCT (submission to COMPLETED), mean time to the deliver target, makespan,
# allocated cpu-seconds and the machine's busy cpu-seconds over the run (/proc/stat: learners,
# weftd and podman together), resizes in place with their mean stall and latency (below) and
# preemptions with their mean cost (from PREEMPTING to RUNNING again), mean final accuracy. Then the
# elastic runs against fixed gangs under fairshare, and weft-sim's prediction of every run (the
# plan's sim.csv: profiled jobs at the learner-seconds per epoch measured at each world size, with
# the profiles' start cost, and once more linear in the learners) with its error in mean JCT and
# makespan and whether it orders the runs as they ran. Last line: JSON. About 7 minutes per run
# with the defaults and 5 for the profiles, 40 in all (2 cores).
#
# Usage: bench/cluster_replay.sh [RUNS="fifo:fixed fairshare:fixed fairshare:elastic goodput:elastic targets:elastic"]
#                                [WORKLOAD=workload-1] [JOBS=16] [TIME_SCALE=0.1] [WORK_SCALE=0.02]
# Environment: NODES (4), MAX_EPOCHS (12), TRAIN_SAMPLES (12000), WEFT_TRACES (../shared/traces),
# KEEP=1 keeps the work directory (manifests, plans, weftd data and logs, per-run JSON);
# PROFILE_ONLY=1 stops after the profiles (printed as JSON).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
RUNS=${1:-fifo:fixed fairshare:fixed fairshare:elastic goodput:elastic targets:elastic}
WORKLOAD=${2:-workload-1}; JOBS=${3:-16}; TIME_SCALE=${4:-0.1}; WORK_SCALE=${5:-0.02}
NODES=${NODES:-4}; MAX_EPOCHS=${MAX_EPOCHS:-12}; TRAIN=${TRAIN_SAMPLES:-12000}
T="${WEFT_TRACES:-$PWD/../shared/traces}/pollux"
[ -f "$T/workloads/$WORKLOAD.csv" ] || { echo "no $T/workloads/$WORKLOAD.csv (WEFT_TRACES)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'stop_weftd; [ -n "${KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"' EXIT
cores=$(nproc)
{
  echo "nodes:"
  for i in $(seq 0 $((NODES - 1))); do
    echo "  - {name: node-$i, cpus: 0.5, memory_mb: 4096, cpuset: [$(( (i / 2) % cores ))]}"
  done
} >"$WORK/nodes.yaml"
echo "cluster replay: $WORKLOAD's first $JOBS jobs on $NODES nodes × 0.5 cpu; time × $TIME_SCALE," \
  "work $WORK_SCALE learner-s per trace GPU-s; runs: $RUNS"

DRIVER=$(cat <<'PY'
import datetime, json, os, re, subprocess, sys, time, urllib.request
binp, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
server, token = os.environ["WEFT_SERVER"], os.environ["WEFT_TOKEN"]
def get(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req))
def ts(s): return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
def busy():  # the machine's busy cpu-seconds so far
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")
def submit(path):
    r = subprocess.run([f"{binp}/weft", "submit", path], check=True, capture_output=True, text=True)
    return re.search(r"job (job-\S+) submitted", r.stdout).group(1)
if mode == "profile":  # argv[4:] = groups of manifests ("a.yaml+b.yaml"), a group at a time
    prof, measured = {}, []
    for group in sys.argv[4:]:
        ids = [submit(m) for m in group.split("+")]
        while any(get(f"/v1/jobs/{i}")["state"] not in ("COMPLETED", "FAILED") for i in ids): time.sleep(0.5)
        measured += ids
    for i in measured:
        j = get(f"/v1/jobs/{i}")
        if j["state"] != "COMPLETED": raise SystemExit(f"profile {j['name']}: {j['state']}: {j['reason']}")
        evals = [p for p in get(f"/v1/jobs/{i}/metrics?limit=10000&from=0")["points"] if "test_accuracy" in p]
        learners = j["spec"]["resources"]["learners"]
        wall = (evals[-1]["wall_time_ms"] - evals[0]["wall_time_ms"]) / 1000 / (len(evals) - 1)
        model = j["name"].split("-at-")[0]
        p = prof.setdefault(model, {"by_learners": {}, "starts": []})
        p["by_learners"].setdefault(str(learners), []).append(wall * learners)
        # What it held its learners for beyond its epochs: the start and the end.
        placed = next(ts(e["time"]) for e in j["history"] if e["to"] == "PLACED")
        p["starts"].append(ts(j["updated_at"]) - placed - len(evals) * wall)
        if "-at-" not in j["name"]:  # the full profile
            p["epoch_seconds"] = round(wall * learners, 3)
            p["accuracy"] = [round(e["test_accuracy"], 4) for e in evals]
        print(f"  profile {j['name']}: {wall:.2f} s per epoch at {learners} learners "
              f"({wall * learners:.2f} learner-s), {p['starts'][-1]:.2f} s to start and end, accuracy "
              + " ".join(f"{e['test_accuracy']:.3f}" for e in evals), file=sys.stderr)
    for p in prof.values():  # the means over a group's jobs
        p["epoch_seconds_by_learners"] = {w: round(sum(v) / len(v), 3) for w, v in p.pop("by_learners").items()}
        p["start_seconds"] = round(sum(p["starts"]) / len(p["starts"]), 3); del p["starts"]
    json.dump(prof, open(out, "w"))
    raise SystemExit(0)
doc = json.load(open(f"{mode}/plan.json")); plan, cpus = doc["jobs"], doc["options"]["cpus"]
ids, start, b0 = {}, time.time(), busy()
allocated, last, todo = 0.0, time.time(), sorted(plan, key=lambda j: j["submit_s"])
while True:
    now = time.time()
    while todo and now - start >= todo[0]["submit_s"]:
        j = todo.pop(0); ids[j["name"]] = submit(f"{mode}/{j['name']}.yaml")
    jobs = get("/v1/jobs")["jobs"]
    allocated += (now - last) * sum(cpus * len(j["learners"]) for j in jobs); last = now
    if not todo and len(jobs) == len(plan) and all(j["state"] in ("COMPLETED", "FAILED") for j in jobs):
        break
    time.sleep(0.5)
b1 = busy()
res = {"jobs": {}, "allocated_cpu_s": allocated, "busy_cpu_s": b1 - b0}
for name, i in ids.items():
    j = get(f"/v1/jobs/{i}")
    if j["state"] != "COMPLETED": raise SystemExit(f"{name}: {j['state']}: {j['reason']}")
    h = j["history"]
    resizes = [(int(m.group(1)), ts(e["time"])) for e in h
               for m in [re.match(r"generation (\d+): ", e["reason"])] if m]
    preempt = []
    for k, e in enumerate(h):
        if e["to"] == "PREEMPTING":
            back = next((ts(f["time"]) for f in h[k:] if f["to"] == "RUNNING"), None)
            if back: preempt.append(back - ts(e["time"]))
    placed = next((ts(e["time"]) for e in h if e["to"] == "PLACED"), None)
    running = next((ts(e["time"]) for e in h if e["to"] == "RUNNING"), None)
    d = j["targets"]["deliver"]
    res["jobs"][name] = {"jct_s": ts(j["updated_at"]) - ts(j["created_at"]),
                         "created": ts(j["created_at"]), "done": ts(j["updated_at"]),
                         "deliver_s": ts(d["met_at"]) - ts(j["created_at"]) if d.get("met_at") else None,
                         "accuracy": j["models"]["final"]["test_accuracy"],
                         "attempts": j["attempt"], "resizes": resizes, "preemption_costs": preempt,
                         "start_cost_s": running - placed if placed and running else None,
                         "id": i}
json.dump(res, open(out, "w"))
PY
)

# Each in-place resize's cost, from the learners' logs: the stall (the longest of the members'
# "generation G: rank R of M, training on ... N ms after leaving the last one", the time its
# training stood still) and the latency (weftd's history entry "generation G: ..." to the first
# member training in G: the old generation trains on meanwhile, and a grow's newcomer starts).
resize_costs() {  # resize_costs RESULT_JSON -> adds resize_stalls and resize_latencies to it
  python3 - "$BIN" "$1" <<'PY'
import datetime, json, re, subprocess, sys
binp, path = sys.argv[1], sys.argv[2]
res = json.load(open(path))
for name, j in res["jobs"].items():
    first, stall = {}, {}
    for learner in range(64) if j["resizes"] else []:
        r = subprocess.run([f"{binp}/weft", "logs", j["id"], "--rank", str(learner)],
                           capture_output=True, text=True)
        if r.returncode != 0: break
        for line in r.stdout.splitlines():
            m = re.match(r"(\S+) \S+ learner: generation (\d+): rank \d+ of \d+, training on .* "
                         r"(\d+) ms after leaving the last one", line)
            if not m: continue
            t = datetime.datetime.fromisoformat(m.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
            g = int(m.group(2))
            first[g] = min(first.get(g, t), t)
            stall[g] = max(stall.get(g, 0), int(m.group(3)) / 1000)
    j["resize_stalls"] = [stall[g] for g, _ in j["resizes"] if g in stall]
    j["resize_latencies"] = [first[g] - t for g, t in j["resizes"] if g in first]
json.dump(res, open(path, "w"))
PY
}

mkdir -p "$WORK/profile"
profile_manifest() {  # profile_manifest NAME MODEL LEARNERS EPOCHS
  local arch
  arch=$([ "$2" = cnn ] && echo "{architecture: cnn}" || echo "{architecture: mlp, hidden_units: [128]}")
  cat >"$WORK/profile/$1.yaml" <<YAML
name: $1
model: $arch
data: {dataset: fashion-mnist, train_samples: $TRAIN, test_samples: 1000}
training: {epochs: $4, batch_size: 64, threads: 1, seed: 1}
resources: {learners: $3, cpus: 0.5, memory_mb: 1024}
YAML
  echo "$WORK/profile/$1.yaml"
}
# The full profile at NODES learners (budgets and targets), and 2 epochs at each smaller power of
# two w (the throughput per world size weft-sim's profiled jobs scale by), NODES / w such gangs
# at once so that the cluster is as busy as under the full profile and the replay: alone on it, a
# small gang ran up to a third faster than beside others on the same cores.
profiles=()
for model in cnn mlp; do
  profiles+=("$(profile_manifest "$model" "$model" "$NODES" "$MAX_EPOCHS")")
  for ((w = 1; w < NODES; w *= 2)); do
    group=""
    for ((k = 0; k < NODES / w; k++)); do
      group+="${group:++}$(profile_manifest "$model-at-$w-$k" "$model" "$w" 2)"
    done
    profiles+=("$group")
  done
done
echo "profiling the models on the busy cluster ..."
start_weftd "$WORK/profile-weftd" --config "$WORK/nodes.yaml"
python3 -c "$DRIVER" "$BIN" profile "$WORK/profiles.json" "${profiles[@]}"
stop_weftd
if [ -n "${PROFILE_ONLY:-}" ]; then cat "$WORK/profiles.json"; echo; exit 0; fi

for mode in fixed elastic; do
  "$BIN/weft-replay" --workload "$T/workloads/$WORKLOAD.csv" --app-traces "$T/app-traces" \
    --profiles "$WORK/profiles.json" --out "$WORK/$mode" --jobs "$JOBS" --time-scale "$TIME_SCALE" \
    --work-scale "$WORK_SCALE" --learner-cap "$NODES" --max-epochs "$MAX_EPOCHS" \
    --train-samples "$TRAIN" --test-samples 1000 --cpus 0.5 $([ $mode = elastic ] && echo --elastic) \
    >"$WORK/$mode.table"
done
echo "the plan (elastic jobs: learners 1 up to the fixed gang's):"; cat "$WORK/fixed.table"

for run in $RUNS; do
  policy=${run%%:*}; mode=${run##*:}
  echo "run $policy with $mode jobs ..."
  start_weftd "$WORK/$policy-$mode" --config "$WORK/nodes.yaml" --policy "$policy"
  python3 -c "$DRIVER" "$BIN" "$WORK/$mode" "$WORK/$run.json"
  resize_costs "$WORK/$run.json"
  stop_weftd
  # weft-sim's prediction of the same run: the plan's profiled jobs, one learner per node, 1 s
  # rounds, each start and in-place resize costing what the profiles measured (sim.csv's
  # start_seconds, resize_seconds). The restart delay, the run's own mean start (PLACED ->
  # RUNNING) in whole seconds, is only the linear prediction's: how weft-sim predicted before the
  # profiles measured world sizes and costs.
  delay=$(python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1]))['jobs'].values(); \
print(round(statistics.mean(j['start_cost_s'] for j in r if j['start_cost_s'] is not None)))" "$WORK/$run.json")
  "$BIN/weft-sim" --policy "$policy" --workloads "$WORK/$mode/sim.csv" --nodes "$NODES" \
    --gpus-per-node 1 --interval 1 --restart-delay "$delay" --out "$WORK/sim-$policy-$mode" -q \
    >"$WORK/$run.sim.json"
  # And as before: every job linear in its learners, every (re)allocation the restart delay.
  cut -d, -f1-7 "$WORK/$mode/sim.csv" >"$WORK/$mode/sim-linear.csv"
  "$BIN/weft-sim" --policy "$policy" --workloads "$WORK/$mode/sim-linear.csv" --nodes "$NODES" \
    --gpus-per-node 1 --interval 1 --restart-delay "$delay" --out "$WORK/sim-linear-$policy-$mode" -q \
    >"$WORK/$run.sim-linear.json"
done

python3 - "$WORK" $RUNS <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], sys.argv[2:]
def p95(v):
    v = sorted(v); k = (len(v) - 1) * 0.95; f = int(k)
    return v[f] + (v[min(f + 1, len(v) - 1)] - v[f]) * (k - f)
out = {}
print(f"{'run':20s} {'mean JCT':>9s} {'p95 JCT':>8s} {'deliver':>8s} {'makespan':>9s} {'alloc cpu-s':>11s} "
      f"{'busy':>6s} {'resizes':>7s} {'stall':>6s} {'latency':>7s} {'preempt':>7s} {'cost s':>6s} {'accuracy':>8s}")
for run in runs:
    r = json.load(open(f"{work}/{run}.json")); jobs = r["jobs"].values()
    jct = [j["jct_s"] for j in jobs]
    dl = [j["deliver_s"] for j in jobs if j["deliver_s"] is not None]
    rc = [c for j in jobs for c in j["resize_stalls"]]
    rl = [c for j in jobs for c in j["resize_latencies"]]
    pc = [c for j in jobs for c in j["preemption_costs"]]
    s = {"mean_jct_s": statistics.mean(jct), "p95_jct_s": p95(jct),
         "mean_time_to_deliver_s": statistics.mean(dl) if dl else None, "delivered": len(dl),
         "makespan_s": max(j["done"] for j in jobs) - min(j["created"] for j in jobs),
         "allocated_cpu_s": r["allocated_cpu_s"], "busy_cpu_s": r["busy_cpu_s"],
         "busy_over_allocated": r["busy_cpu_s"] / r["allocated_cpu_s"],
         "resizes": sum(len(j["resizes"]) for j in jobs),
         "mean_resize_stall_s": statistics.mean(rc) if rc else None, "max_resize_stall_s": max(rc, default=None),
         "mean_resize_latency_s": statistics.mean(rl) if rl else None,
         "preemptions": len(pc), "mean_preemption_cost_s": statistics.mean(pc) if pc else None,
         "mean_accuracy": statistics.mean(j["accuracy"] for j in jobs)}
    sim = json.load(open(f"{work}/{run}.sim.json"))
    s["sim_mean_jct_s"] = sim["mean_jct"]; s["sim_makespan_s"] = sim["mean_makespan"]
    s["sim_mean_jct_error"] = sim["mean_jct"] / s["mean_jct_s"] - 1
    s["sim_makespan_error"] = sim["mean_makespan"] / s["makespan_s"] - 1
    lin = json.load(open(f"{work}/{run}.sim-linear.json"))
    s["sim_linear_mean_jct_s"] = lin["mean_jct"]; s["sim_linear_makespan_s"] = lin["mean_makespan"]
    s["sim_linear_mean_jct_error"] = lin["mean_jct"] / s["mean_jct_s"] - 1
    out[run] = s
    f = lambda x, w=6, p=1: f"{x:{w}.{p}f}" if x is not None else f"{'-':>{w}s}"
    print(f"{run:20s} {f(s['mean_jct_s'],9)} {f(s['p95_jct_s'],8)} {f(s['mean_time_to_deliver_s'],8)} "
          f"{f(s['makespan_s'],9)} {f(s['allocated_cpu_s'],11)} {f(s['busy_over_allocated'],6,2)} "
          f"{s['resizes']:7d} {f(s['mean_resize_stall_s'],6,2)} {f(s['mean_resize_latency_s'],7,2)} {s['preemptions']:7d} "
          f"{f(s['mean_preemption_cost_s'],6,1)} {s['mean_accuracy']:8.4f}")
print(f"\nweft-sim's prediction of each run (its profiled jobs at the throughput measured per world "
      f"size and the profiles' start and resize costs, 1 s rounds; 'linear': every job linear in "
      f"its learners, each (re)allocation the run's mean start):")
for run, s in out.items():
    print(f"{run:20s} mean JCT {s['sim_mean_jct_s']:7.1f} s (live {s['mean_jct_s']:7.1f}, error "
          f"{100 * s['sim_mean_jct_error']:+5.1f} %; linear {s['sim_linear_mean_jct_s']:7.1f}, "
          f"{100 * s['sim_linear_mean_jct_error']:+5.1f} %), makespan {s['sim_makespan_s']:6.0f} s "
          f"(live {s['makespan_s']:6.0f}, {100 * s['sim_makespan_error']:+5.1f} %)")
live_order = sorted(out, key=lambda r: out[r]["mean_jct_s"])
sim_order = sorted(out, key=lambda r: out[r]["sim_mean_jct_s"])
print("order by mean JCT, live:", " < ".join(live_order))
print("order by mean JCT, sim: ", " < ".join(sim_order), "(same)" if live_order == sim_order else "(differs)")
base = out.get("fairshare:fixed")
if base:
    for run, s in out.items():
        if run.endswith(":elastic"):
            s["mean_jct_over_fairshare_fixed"] = s["mean_jct_s"] / base["mean_jct_s"]
            s["accuracy_points_vs_fairshare_fixed"] = 100 * (s["mean_accuracy"] - base["mean_accuracy"])
            print(f"{run}: mean JCT {s['mean_jct_over_fairshare_fixed']:.3f} of fairshare's fixed gangs "
                  f"(goal <= 0.8), accuracy {s['accuracy_points_vs_fairshare_fixed']:+.2f} points")
print(json.dumps(out))
PY
