#!/usr/bin/env bash
# Recovery from a killed worker, weft vs torchrun, in one run (issue: fault tolerance):
#  - torchrun: ../shared/reference/torchrun_fmnist_ddp.py, 2 workers × 1 thread, checkpoint every
#    200 steps; once 300 steps are done (100 past the checkpoint) one worker gets kill -9;
#    TorchElastic restarts both from the checkpoint.
#  - weft: the same CNN as a weft job with 2 learners × 1 thread kept a gang on this one host
#    (gang_on_one_host: learners, as torchrun's are 2 processes; checkpoint.every_steps 200); at
#    step 300 rank 1 gets kill -9; rank 0 checkpoints the last step both completed and weftd
#    restarts the gang from it.
# For each: seconds from the kill to training again (torchrun: the workers' "start" line; weft:
# the new learner's "resumed from" log line), steps lost (step at the kill − step resumed from),
# and seconds lost (from the kill until the job is back at the step it had reached).
# Needs python3-torch (WEFT_WITH_BENCH_DEPS=1 scripts/install-deps.sh). Last line: JSON.
#
# Usage: bench/recovery_compare.sh [KILL_AT_STEP=300] [CKPT_STEPS=200]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
KILL_AT=${1:-300}; CKPT=${2:-200}
REF="${WEFT_REFERENCE:-$PWD/../shared/reference}/torchrun_fmnist_ddp.py"
command -v torchrun >/dev/null || { echo "torchrun not found (python3-torch)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'stop_weftd; pkill -9 -f torchrun_fmnist_ddp 2>/dev/null || true; rm -rf "$WORK"' EXIT
start_weftd "$WORK/data"
cat >"$WORK/job.yaml" <<YAML
name: recovery
model: {architecture: cnn}
data: {dataset: fashion-mnist}
training: {epochs: 1, batch_size: 64, optimizer: adam, learning_rate: 0.001, threads: 1}
resources: {learners: 2, cpus: 1, memory_mb: 2048, gang_on_one_host: learners}
checkpoint: {every_steps: $CKPT, every_seconds: 0}
max_restarts: 3
YAML

python3 - "$REF" "$WORK" "$KILL_AT" "$CKPT" "$BIN" <<'PY'
import json, os, re, signal, subprocess, sys, time, urllib.request
ref, work, kill_at, ckpt, binp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
server, token = os.environ["WEFT_SERVER"], os.environ["WEFT_TOKEN"]

sys.path.insert(0, "bench")
from torchrun_recovery import wait, run as torchrun_recovery
torch_r = torchrun_recovery(ref, work, 2, kill_at, str(ckpt))

# ---- weft ----
def api(path):
    req = urllib.request.Request(f"http://{server}{path}", headers={"Authorization": f"Bearer {token}"})
    return json.load(urllib.request.urlopen(req, timeout=10))
sub = subprocess.run([f"{binp}/weft", "submit", f"{work}/job.yaml"], capture_output=True, text=True, check=True)
job = re.search(r"job (job-\S+) submitted", sub.stdout).group(1)
wait(lambda: api(f"/v1/jobs/{job}")["progress"]["step"] >= kill_at, 600, "weft progress")
step_at_kill = api(f"/v1/jobs/{job}")["progress"]["step"]
pid = None
for p in os.listdir("/proc"):
    if not p.isdigit(): continue
    try: env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
    except OSError: continue
    if f"WEFT_JOB_ID={job}".encode() in env and b"RANK=1" in env: pid = int(p)
t_kill = time.time(); os.kill(pid, signal.SIGKILL)
log = f"{work}/data/jobs/{job}/logs/learner-0.log"
def resumed():
    for line in open(log):
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+).*resumed from .*step (\d+)", line)
        if m:
            import datetime
            t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
            if t > t_kill - 1: return t, int(m.group(2))
    return None
t_res, res_step = wait(resumed, 300, "weft restart")
# The first metric point the new learner reports at or past the step reached before the kill
# (metric points carry the learner's own unix time; points are reported every 50 steps or so).
def regained():
    pts = api(f"/v1/jobs/{job}/metrics")["points"]
    return next((p["wall_time_ms"] / 1000.0 for p in pts if p["wall_time_ms"] / 1000.0 > t_res and p["step"] >= step_at_kill), None)
t_back = wait(regained, 600, "weft regaining")
# The last progress report can trail the step the learner was on, so a resume from rank 0's
# checkpoint of the last completed step may be ahead of it: that is 0 steps lost.
weft_r = {"restart_s": round(t_res - t_kill, 2), "steps_lost": max(0, step_at_kill - res_step),
          "seconds_lost": round(t_back - t_kill, 2), "step_at_kill": step_at_kill, "resumed_step": res_step}
print(f"weft (2 learners):    kill -9 of rank 1 at step {step_at_kill}; back to training after {weft_r['restart_s']} s "
      f"from step {res_step}; {weft_r['steps_lost']} steps lost; back at step {step_at_kill} after {weft_r['seconds_lost']} s", flush=True)
subprocess.run([f"{binp}/weft", "delete", job], capture_output=True)
print(json.dumps({"torchrun": torch_r, "weft": weft_r}))
PY
