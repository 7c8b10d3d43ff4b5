#!/usr/bin/python3
"""The Optuna anchor of bench/hpo_compare.sh: Optuna 3.1 (Debian's python3-optuna) searching the
space weft's experiment searches on the same model — MODEL mlp: learning rate, batch size and
hidden widths of the MLP weft's `mlp` builds (fc 784->hidden...->10, ReLU, Adam); MODEL cnn:
learning rate and batch size of the CNN weft's `cnn` builds (conv 3x3 1->32, ReLU, max-pool 2,
conv 3x3 32->64, ReLU, max-pool 2, fc 3136->128, ReLU, fc 128->10, Adam) — on the same data (the first TRAIN Fashion-MNIST
training images and the first TEST test images, normalised as ../shared/reference does and as
weft does), with RandomSampler(seed) (weft's ASHA draws at random too) and
SuccessiveHalvingPruner (rungs at min_resource * eta^k epochs: ASHA's), N_JOBS trials at once on
one thread each.

Prints one JSON line: best test accuracy, wall seconds, cpu-seconds (the trials' wall times, one
thread each) and the wall seconds until some trial first reached DELIVER.
Usage: hpo_optuna.py TRIALS MAX_EPOCHS ETA N_JOBS SEED DELIVER [TRAIN=12000 TEST=2000 MODEL=mlp]"""
import gzip, json, sys, threading, time
import numpy as np, optuna, torch, torch.nn as nn, torch.nn.functional as F

D = "/usr/share/datasets/fashion-mnist/"
LRS = [1e-3, 3e-3, 1e-2, 3e-2]
MODEL = sys.argv[9] if len(sys.argv) > 9 else "mlp"
BATCHES = [32, 128] if MODEL == "mlp" else [32, 64, 128, 256]
WIDTHS = ["64", "256,64"]


def idx(name):
    with gzip.open(D + name) as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def images(name, n):
    x = torch.from_numpy(idx(name)[:n].copy()).float().div(255).sub(0.2860).div(0.3530)
    return x.flatten(1) if MODEL == "mlp" else x.unsqueeze(1)


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def mlp(widths):
    layers, width = [], 784
    for w in widths:
        layers += [nn.Linear(width, w), nn.ReLU()]
        width = w
    return nn.Sequential(*layers, nn.Linear(width, 10))


trials, max_epochs, eta, n_jobs, seed, deliver = (int(sys.argv[1]), int(sys.argv[2]),
                                                 int(sys.argv[3]), int(sys.argv[4]),
                                                 int(sys.argv[5]), float(sys.argv[6]))
n_train = int(sys.argv[7]) if len(sys.argv) > 7 else 12000
n_test = int(sys.argv[8]) if len(sys.argv) > 8 else 2000
torch.set_num_threads(1)
xtr = images("train-images-idx3-ubyte.gz", n_train)
ytr = torch.from_numpy(idx("train-labels-idx1-ubyte.gz")[:n_train].astype(np.int64))
xte = images("t10k-images-idx3-ubyte.gz", n_test)
yte = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz")[:n_test].astype(np.int64))

lock = threading.Lock()
t0 = time.time()
state = {"cpu_s": 0.0, "deliver_s": None}


def objective(trial):
    torch.set_num_threads(1)
    lr = trial.suggest_categorical("learning_rate", LRS)
    batch = trial.suggest_categorical("batch_size", BATCHES)
    torch.manual_seed(trial.number)
    if MODEL == "mlp":
        net = mlp([int(w) for w in trial.suggest_categorical("hidden_units", WIDTHS).split(",")])
    else:
        net = cnn()
    opt = torch.optim.Adam(net.parameters(), lr)
    begun = time.time()
    acc = 0.0
    try:
        for epoch in range(1, max_epochs + 1):
            net.train()
            perm = torch.randperm(len(xtr))
            for i in range(0, len(xtr), batch):
                b = perm[i:i + batch]
                opt.zero_grad()
                F.cross_entropy(net(xtr[b]), ytr[b]).backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                acc = (net(xte).argmax(1) == yte).float().mean().item()
            with lock:
                if acc >= deliver and state["deliver_s"] is None:
                    state["deliver_s"] = time.time() - t0
            trial.report(acc, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return acc
    finally:
        with lock:
            state["cpu_s"] += time.time() - begun


optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(
    direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed),
    pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=eta))
study.optimize(objective, n_trials=trials, n_jobs=n_jobs)
# The best accuracy of any trial: a finished trial's value, a pruned trial's best report. (weft's
# side counts each trial's latest result, so this leans, if at all, Optuna's way.)
def reached(t):
    return t.value if t.value is not None else max(t.intermediate_values.values(), default=0)
top = max(study.trials, key=reached)
best = reached(top)
print(json.dumps({"best": best, "best_params": top.params,
                  "best_epochs": len(top.intermediate_values), "wall_s": time.time() - t0,
                  "cpu_s": state["cpu_s"],
                  "deliver_s": state["deliver_s"],
                  "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)}))
