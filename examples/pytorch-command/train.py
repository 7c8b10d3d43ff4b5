#!/usr/bin/python3
"""The PyTorch Fashion-MNIST CNN as a weft command job, launched the torchrun way: weft sets
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every learner, so with 2 learners this is
DistributedDataParallel over gloo exactly as under torchrun. It runs bare too:

    python3 train.py --epochs 1                       # one process, no weft
    torchrun --nproc_per_node=2 train.py --epochs 1   # two, under torchrun

weft_job.py (sdk/python in the weft repository) reports metrics, announces checkpoints and
models, and says where to resume after a restart."""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import weft_job


def idx(directory, name):
    """One IDX file (gzipped or not) as a numpy array."""
    path = os.path.join(directory, name)
    opener = gzip.open if os.path.exists(path + ".gz") else open
    with opener(path + ".gz" if opener is gzip.open else path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(directory, split, limit):
    prefix = "train" if split == "train" else "t10k"
    x = idx(directory, prefix + "-images-idx3-ubyte")
    y = idx(directory, prefix + "-labels-idx1-ubyte")
    if limit:
        x, y = x[:limit], y[:limit]
    # weft's preprocessing (docs/manifest.md): [N, 1, 28, 28] float32, (pixel/255 - 0.2860)/0.3530
    x = torch.from_numpy(x.copy()).float().div(255).sub(0.2860).div(0.3530).unsqueeze(1)
    return x, torch.from_numpy(y.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 7 * 7, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))  # logits [N, 10]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--train-samples", type=int, default=0, help="first N only; 0 = all")
    p.add_argument("--test-samples", type=int, default=0)
    p.add_argument("--checkpoint-steps", type=int, default=200)
    args = p.parse_args()
    weft_job.catch_stop()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    world = weft_job.world_size()
    if world > 1:
        dist.init_process_group("gloo")
    rank = weft_job.rank()
    data = os.environ.get("DATA_DIR", "/usr/share/datasets/fashion-mnist")
    xtr, ytr = load(data, "train", args.train_samples)
    xte, yte = load(data, "test", args.test_samples)

    torch.manual_seed(0)
    model = Net()
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    epoch, step_in_epoch, step = 0, 0, 0
    if weft_job.resume_path():
        s = torch.load(weft_job.resume_path())
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        epoch, step_in_epoch, step = s["epoch"], s["step_in_epoch"], s["step"]
        print(f"rank {rank}: resumed at epoch {epoch} step {step}", flush=True)

    def checkpoint():
        if rank != 0:
            return
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                    "step_in_epoch": step_in_epoch, "step": step}, "ckpt.pt")
        weft_job.save_checkpoint("ckpt.pt", step=step, epoch=epoch)

    steps_per_epoch = len(xtr) // world // args.batch_size
    while epoch < args.epochs:
        g = torch.Generator()
        g.manual_seed(epoch)
        mine = torch.randperm(len(xtr), generator=g)[rank::world]
        net.train()
        t0, losses, done = time.time(), [], 0
        while step_in_epoch < steps_per_epoch:
            b = mine[step_in_epoch * args.batch_size:(step_in_epoch + 1) * args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(net(xtr[b]), ytr[b])
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step_in_epoch, step, done = step_in_epoch + 1, step + 1, done + 1
            if step % 50 == 0:
                weft_job.report(step=step, epoch=epoch, train_loss=sum(losses) / len(losses),
                                samples=step * args.batch_size * world,
                                samples_per_s=done * args.batch_size * world / (time.time() - t0),
                                epochs_total=args.epochs,
                                steps_total=steps_per_epoch * args.epochs)
                losses = []
            if step % args.checkpoint_steps == 0 and step_in_epoch < steps_per_epoch:
                checkpoint()
            if weft_job.stop_requested():
                checkpoint()
                print(f"rank {rank}: stopping at step {step} as weft asked", flush=True)
                return 143
        epoch, step_in_epoch = epoch + 1, 0
        model.eval()
        with torch.no_grad():  # in batches: the whole test set at once is 2 GB of activations
            right = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                        for i in range(0, len(xte), 1000))
            acc = right / len(xte)
        print(f"rank {rank}: epoch {epoch} step {step} test_accuracy {acc:.4f} "
              f"samples/s {done * args.batch_size * world / (time.time() - t0):.0f}", flush=True)
        weft_job.report(step=step, epoch=epoch, test_accuracy=acc, epochs_total=args.epochs,
                        steps_total=steps_per_epoch * args.epochs)
        checkpoint()
        if rank == 0:
            torch.jit.script(model).save("model.pt")
            weft_job.save_model("model.pt", test_accuracy=acc, step=step, epoch=epoch)
        if weft_job.complete_target_met(acc):
            break
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
