"""weft_job: what a command job's program tells weft, and what weft tells it.

Dependency-free (Python 3.7+ standard library). Copy this file next to your training script and
put both in your code archive. Outside weft (no WEFT_METRICS_FILE in the environment) every call
is harmless: report/save_* do nothing and resume_path() is None, so the same script runs bare.

The channel is JSON lines appended to $WEFT_METRICS_FILE (docs/manifest.md "Command jobs"):

    report(step=120, epoch=1, train_loss=0.41, test_accuracy=0.86)
    save_checkpoint("ckpt.pt", step=120, epoch=1)     # after the file is written
    save_model("model.pt", test_accuracy=0.86, step=120, epoch=1)

Paths are files in your working directory (WORK_DIR, the current directory). weft copies each
announced checkpoint and model into the job's own storage at once, so you may overwrite the file
afterwards. Only rank 0's checkpoints and models are kept (as in torchrun's convention).
"""
import json
import os
import signal

__all__ = ["report", "save_checkpoint", "save_model", "resume_path", "rank", "world_size",
           "targets", "complete_target_met", "stop_requested", "catch_stop"]

_stop = False


def _write(record):
    path = os.environ.get("WEFT_METRICS_FILE")
    if not path:
        return
    line = json.dumps({k: v for k, v in record.items() if v is not None}, allow_nan=False)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


def _fsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def report(step, epoch=None, train_loss=None, test_accuracy=None, test_loss=None, samples=None,
           samples_per_s=None, epochs_total=None, steps_total=None):
    """Reports progress and metrics. step: optimizer steps taken (int); epoch: epochs completed;
    train_loss: mean loss since the last report; test_accuracy in [0, 1]; samples: training
    samples consumed by the whole job; samples_per_s: the job's throughput; epochs_total and
    steps_total: the budget, which weft shows as progress."""
    _write({"step": int(step), "epoch": epoch, "train_loss": train_loss,
            "test_accuracy": test_accuracy, "test_loss": test_loss, "samples": samples,
            "samples_per_s": samples_per_s, "epochs_total": epochs_total,
            "steps_total": steps_total})


def save_checkpoint(path, step, epoch=0):
    """Announces a checkpoint file you have finished writing (e.g. with torch.save). weft makes
    it durable and resumes a restarted job from the newest one: resume_path()."""
    if os.environ.get("WEFT_METRICS_FILE"):
        _fsync(path)
    _write({"checkpoint": str(path), "step": int(step), "epoch": int(epoch)})


def save_model(path, test_accuracy, step, epoch=0):
    """Announces a model file (torch.jit.save it so anyone can torch.jit.load it) and its test
    accuracy. The first that meets targets.deliver becomes the delivered model; the last one
    announced before the program exits 0 becomes the final model."""
    if os.environ.get("WEFT_METRICS_FILE"):
        _fsync(path)
    _write({"model": str(path), "test_accuracy": float(test_accuracy), "step": int(step),
            "epoch": int(epoch)})


def resume_path():
    """The checkpoint to resume from after a restart (a copy of the newest one committed), or
    None on a fresh start."""
    return os.environ.get("WEFT_RESUME_FROM") or None


def rank():
    """This learner's rank in the job, 0 … world_size() - 1 ($RANK; 0 outside weft)."""
    return int(os.environ.get("RANK", "0"))


def world_size():
    """How many learners the job runs now ($WORLD_SIZE; 1 outside weft)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def targets():
    """(deliver, complete) from the manifest's targets, each a float or None."""
    def get(name):
        v = os.environ.get(name)
        return float(v) if v else None
    return get("WEFT_TARGET_DELIVER"), get("WEFT_TARGET_COMPLETE")


def complete_target_met(test_accuracy):
    """Whether test_accuracy meets targets.complete: time to save the final model and exit 0."""
    complete = targets()[1]
    return complete is not None and test_accuracy >= complete


def _on_sigterm(signum, frame):
    global _stop
    _stop = True


def catch_stop():
    """From now on SIGTERM (halt, preemption, a lost gang) sets stop_requested() instead of
    ending the program: save a checkpoint and exit soon (weft kills it after a grace period of
    8 seconds). Without this call SIGTERM ends the program as Python's default does."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def stop_requested():
    """Whether SIGTERM has come since catch_stop(): checkpoint, then exit."""
    return _stop


# In weft's sandbox the program is its PID namespace's init, which ignores a SIGTERM it has no
# handler for: keep Python's usual meaning (end the program) unless catch_stop() is called.
if os.environ.get("WEFT_METRICS_FILE"):
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(143))
