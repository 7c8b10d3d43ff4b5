#!/usr/bin/python3
"""torchrun's side of the recovery benchmarks (recovery_compare.sh, elastic_recovery.sh): runs
../shared/reference/torchrun_fmnist_ddp.py with NPROC workers x 1 thread and --max_restarts=3,
checkpointing every CKPT steps; once KILL_AT steps are done, kill -9 of the rank-1 worker, after
which TorchElastic restarts every worker from the checkpoint. Prints one human line and, last, a
JSON line: seconds from the kill to training again (the workers' "start" line), steps lost (step
at the kill - step resumed from), seconds until back at the step reached.
Usage: torchrun_recovery.py REFERENCE_SCRIPT WORK_DIR NPROC KILL_AT CKPT, or import it (wait, run)."""
import json, os, re, signal, subprocess, sys, time

def wait(cond, timeout, what):
    """Polls cond() every 50 ms until it returns something true (returned) or `timeout` seconds pass."""
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v: return v
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")

def run(ref, work, nproc, kill_at, ckpt):
    """The measurement; prints the human line and returns the figures (a dict)."""
    os.makedirs(f"{work}/ck", exist_ok=True)
    out = open(f"{work}/torchrun.out", "w")
    tr = subprocess.Popen(["torchrun", f"--nproc_per_node={nproc}", "--max_restarts=3", "--redirects", "1", "--tee", "1",
                           "--log_dir", f"{work}/trlogs", ref, "1", f"{work}/ck", ckpt],
                          stdout=out, stderr=subprocess.DEVNULL, env={**os.environ, "THREADS": "1"}, start_new_session=True)
    def events():
        evs = []
        for line in open(f"{work}/torchrun.out"):
            m = re.search(r"\{.*\}", line)
            if m:
                try: evs.append(json.loads(m.group(0)))
                except ValueError: pass
        return evs
    wait(lambda: any(e["event"] == "progress" and e["step"] >= kill_at for e in events()), 900, "torchrun progress")
    victim = None
    for p in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            argv = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
        except OSError: continue
        is_worker = any(b"torchrun_fmnist_ddp" in a for a in argv) and not any(a.endswith(b"/torchrun") for a in argv)
        if is_worker and b"RANK=1" in env: victim = int(p)
    if victim is None: raise SystemExit("no rank-1 torchrun worker found")
    step_at_kill = max(e["step"] for e in events() if e["event"] == "progress")
    t_kill = time.time(); os.kill(victim, signal.SIGKILL)
    restart = wait(lambda: next((e for e in events() if e["event"] == "start" and e["restart"] >= 1 and e["rank"] == 0), None), 300, "torchrun restart")
    back = wait(lambda: next((e for e in events() if e["event"] == "progress" and e["t"] > t_kill and e["step"] >= step_at_kill), None), 900, "torchrun regaining")
    r = {"restart_s": round(restart["t"] - t_kill, 2), "steps_lost": step_at_kill - restart["step"],
         "seconds_lost": round(back["t"] - t_kill, 2), "step_at_kill": step_at_kill, "resumed_step": restart["step"]}
    os.killpg(tr.pid, signal.SIGKILL); tr.wait()
    print(f"torchrun ({nproc} workers): kill -9 of rank 1 at step {step_at_kill}; back to training after {r['restart_s']} s "
          f"from step {restart['step']}; {r['steps_lost']} steps lost; back at step {step_at_kill} after {r['seconds_lost']} s", flush=True)
    return r

if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])), flush=True)
