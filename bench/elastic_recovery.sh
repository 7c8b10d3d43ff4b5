#!/usr/bin/env bash
# Recovery from a killed learner without a restart, weft's elastic job vs torchrun, in one run
# (issue 14):
#  - torchrun: ../shared/reference/torchrun_fmnist_ddp.py, 3 workers × 1 thread, checkpoint every
#    CKPT_STEPS steps, --max_restarts=3; once KILL_AT_STEP steps are done one worker gets kill -9
#    and TorchElastic restarts all three from the checkpoint.
#  - weft: the same CNN as an elastic job {min: 1, max: 3} on 3 logical nodes of 1 cpu
#    (checkpoint.every_steps CKPT_STEPS; 3 epochs of 313 steps at 3 learners); at step
#    KILL_AT_STEP + 150 learner 1 (rank 1) gets kill -9 — mid-epoch 2, as a kill at an epoch's
#    end meets the learners in their joint evaluation (2 s of the 10,000 test images), which a
#    lost peer interrupts and the new generation does again; the two others re-form in place,
#    and weftd grows the job back with a newcomer.
# For each: seconds from the kill to training again (torchrun: the workers' "start" line; weft:
# the survivors' "generation N: rank 0 of M, training on" log line), steps of applied work lost,
# and seconds from the kill until the job is back at the step it had reached. For weft also the
# grow: seconds from weftd's grow decision (its history entry) to the newcomer training (its
# "joined generation" line; its first step follows within one step time), process start
# included. Needs python3-torch (WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh). Last line: JSON.
#
# Usage: bench/elastic_recovery.sh [KILL_AT_STEP=300] [CKPT_STEPS=200]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
KILL_AT=${1:-300}; CKPT=${2:-200}
REF="${WEFT_REFERENCE:-$PWD/../shared/reference}/torchrun_fmnist_ddp.py"
command -v torchrun >/dev/null || { echo "torchrun not found (python3-torch)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'stop_weftd; pkill -9 -f torchrun_fmnist_ddp 2>/dev/null || true; rm -rf "$WORK"' EXIT
cat >"$WORK/nodes.yaml" <<YAML
nodes:
  - {name: node-a, cpus: 1, memory_mb: 4096}
  - {name: node-b, cpus: 1, memory_mb: 4096}
  - {name: node-c, cpus: 1, memory_mb: 4096}
YAML
start_weftd "$WORK/data" --config "$WORK/nodes.yaml"
cat >"$WORK/job.yaml" <<YAML
name: elastic-recovery
model: {architecture: cnn}
data: {dataset: fashion-mnist}
training: {epochs: 3, batch_size: 64, optimizer: adam, learning_rate: 0.001, threads: 1}
resources: {learners: {min: 1, max: 3}, cpus: 1, memory_mb: 2048}
checkpoint: {every_steps: $CKPT, every_seconds: 0}
max_restarts: 3
YAML

python3 - "$REF" "$WORK" "$KILL_AT" "$CKPT" "$BIN" <<'PY'
import datetime, json, os, re, signal, subprocess, sys, time, urllib.request
ref, work, kill_at, ckpt, binp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
server, token = os.environ["WEFT_SERVER"], os.environ["WEFT_TOKEN"]

sys.path.insert(0, "bench")
from torchrun_recovery import wait, run as torchrun_recovery
torch_r = torchrun_recovery(ref, work, 3, kill_at, str(ckpt))

# ---- weft ----
def api(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req, timeout=10))
def stamp(text):  # a learner log line's local time -> unix seconds
    return datetime.datetime.fromisoformat(text).timestamp()
sub = subprocess.run([f"{binp}/weft", "submit", f"{work}/job.yaml"], capture_output=True, text=True, check=True)
job = re.search(r"job (job-\S+) submitted", sub.stdout).group(1)
wait(lambda: len(api(f"/v1/jobs/{job}")["learners"]) == 3 and api(f"/v1/jobs/{job}")["progress"]["step"] >= kill_at + 150, 900, "weft progress")
victim = next(l["pid"] for l in api(f"/v1/jobs/{job}")["learners"] if l["id"] == 1)
t_kill = time.time(); os.kill(victim, signal.SIGKILL)
logs = f"{work}/data/jobs/{job}/logs"
def line(learner, pattern):
    try: text = open(f"{logs}/learner-{learner}.log").read()
    except OSError: return None
    for l in text.splitlines():
        m = re.match(r"(\S+) \S+ learner: " + pattern, l)
        if m: return m
    return None
lost = wait(lambda: line(0, r"lost a peer learner .* at step (\d+) in generation"), 120, "the survivor's loss")
again = wait(lambda: line(0, r"generation (\d+): rank 0 of (\d+), training on from step (\d+)"), 120, "weft training again")
t_again, lost_step, res_step = stamp(again.group(1)), int(lost.group(2)), int(again.group(4))
def regained():
    pts = api(f"/v1/jobs/{job}/metrics")["points"]
    return next((p["wall_time_ms"] / 1000.0 for p in pts if p["wall_time_ms"] / 1000.0 > t_kill and p["step"] >= lost_step), None)
t_back = wait(regained, 600, "weft regaining")
# The grow: weftd's history entry, then the newcomer (learner 3) in its group.
def grow_entry():
    for e in api(f"/v1/jobs/{job}")["history"]:
        if "grow to 3" in e["reason"] and "joins without a restart" in e["reason"]:
            return stamp(e["time"].replace("Z", "+00:00"))
    return None
t_grow = wait(grow_entry, 120, "the grow")
joined = wait(lambda: line(3, r"joined generation (\d+) as rank (\d+) of (\d+) at step (\d+)"), 120, "the newcomer")
j = api(f"/v1/jobs/{job}")
weft_r = {"restart_s": round(t_again - t_kill, 2), "steps_lost": max(0, lost_step - res_step),
          "seconds_lost": round(max(t_back, t_again) - t_kill, 2), "step_at_kill": lost_step,
          "resumed_step": res_step, "grow_s": round(stamp(joined.group(1)) - t_grow, 2),
          "attempt": j["attempt"], "generation": j["generation"]}
print(f"weft (3 learners):    kill -9 of learner 1 at step {lost_step}; the 2 others train again after {weft_r['restart_s']} s "
      f"from step {res_step}; {weft_r['steps_lost']} steps lost; back at step {lost_step} after {weft_r['seconds_lost']} s; "
      f"grown back to 3 in place, the newcomer training {weft_r['grow_s']} s after the grow decision "
      f"(attempt {j['attempt']}, generation {j['generation']})", flush=True)
subprocess.run([f"{binp}/weft", "delete", job], capture_output=True)
print(json.dumps({"torchrun": torch_r, "weft": weft_r}))
PY
