#!/usr/bin/env bash
# GaDei's claim, tested (issue 15): at small mini-batches a shared-memory parameter server beats
# synchronous allreduce, because the exchange per batch is what limits throughput. One weftd, one
# node of 2 cpus; the CNN, 2 learners × 1 thread, the same data budget and seed, for batch sizes
# 8, 16, 32 and 64: allreduce (c10d Gloo, every step; kept a gang on the one node with
# gang_on_one_host: learners) against training.sync: ps in bsp, asp and
# ssp (the server is a thread of rank 0; learners wait for their own gradient to be applied), and
# `sharded`: asp with the parameters over 2 weft-ps servers reached over gRPC (servers: 2; the
# node counts 4 cpus so that the gang of 2 learners and 2 servers fits, the machine has what it
# has).
# Jobs run one at a time. Samples/s is the job's samples over its running time (from all
# learners registered to COMPLETED: data loading, evaluation and the model's export included for
# every mode alike); accuracy is the final and the best test accuracy on TEST_SAMPLES images.
# Prints a table, where ps's samples/s cross allreduce's, and one JSON line at the end.
#
# Usage: bench/ps_vs_allreduce.sh [EPOCHS=2] [TRAIN_SAMPLES=12000] [TEST_SAMPLES=10000]
#        [BATCHES="8 16 32 64"] [MODES="allreduce bsp asp ssp sharded"]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
EPOCHS=${1:-2}; SAMPLES=${2:-12000}; TEST=${3:-10000}; BATCHES=${4:-"8 16 32 64"}
MODES=${5:-"allreduce bsp asp ssp sharded"}
WORK=$(mktemp -d)
trap 'stop_weftd; rm -rf "$WORK"' EXIT
printf 'nodes:\n  - {name: node-a, cpus: 4, memory_mb: 16384}\n' >"$WORK/nodes.yaml"
start_weftd "$WORK/data" --config "$WORK/nodes.yaml"

echo "ps vs allreduce: CNN, 2 learners × 1 thread on one node, $SAMPLES samples × $EPOCHS epochs"
for batch in $BATCHES; do
  for mode in $MODES; do
    case $mode in
      allreduce) sync="" ;;
      sharded) sync=", sync: ps, ps: {consistency: asp, servers: 2}" ;;
      *) sync=", sync: ps, ps: {consistency: $mode}" ;;
    esac
    cat >"$WORK/$mode-$batch.yaml" <<YAML
name: $mode-b$batch
model: {architecture: cnn}
data: {dataset: fashion-mnist, train_samples: $SAMPLES, test_samples: $TEST}
training: {epochs: $EPOCHS, batch_size: $batch, threads: 1, seed: 7$sync}
resources: {learners: 2, cpus: 1, gang_on_one_host: learners}
YAML
    id=$(submit_and_wait "$WORK/$mode-$batch.yaml")
    curl -fsS -H "Authorization: Bearer $WEFT_TOKEN" "http://$WEFT_SERVER/v1/jobs/$id" |
      python3 -c 'import json,sys; j=json.load(sys.stdin); j["bench"]=sys.argv[1:]; print(json.dumps(j))' \
        "$mode" "$batch" >>"$WORK/results"
  done
done

python3 - "$WORK/results" <<'PY'
import datetime, json, sys

def t(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    mode, batch = j["bench"][0], int(j["bench"][1])
    if j["state"] != "COMPLETED":
        raise SystemExit(f"{mode} batch {batch}: {j['state']}: {j['reason']}")
    running = next(t(e["time"]) for e in j["history"] if e["to"] == "RUNNING")
    seconds = t(j["updated_at"]) - running
    rows[(mode, batch)] = {"samples_per_s": round(j["progress"]["samples"] / seconds, 1),
                           "seconds": round(seconds, 2),
                           "accuracy": j["models"]["final"]["test_accuracy"],
                           "best_accuracy": j.get("best_test_accuracy", 0)}
batches = sorted({b for _, b in rows})
modes = [m for m in ["allreduce", "bsp", "asp", "ssp", "sharded"] if any(k[0] == m for k in rows)]
print(f"{'batch':>5s} " + " ".join(f"{m + ' samples/s':>19s}" for m in modes) + "   accuracy (final/best) " +
      " ".join(f"{m:>11s}" for m in modes))
for b in batches:
    print(f"{b:5d} " + " ".join(f"{rows[(m, b)]['samples_per_s']:19.1f}" for m in modes) + "   " + " " * 20 +
          " ".join(f"{rows[(m, b)]['accuracy']:.3f}/{rows[(m, b)]['best_accuracy']:.3f}" for m in modes))
out = {"batches": batches, "results": {f"{m}-{b}": rows[(m, b)] for m, b in rows}}
for m in modes[1:]:
    ratios = {b: rows[(m, b)]["samples_per_s"] / rows[("allreduce", b)]["samples_per_s"] for b in batches}
    out[f"{m}_over_allreduce"] = {str(b): round(r, 3) for b, r in ratios.items()}
    wins = [b for b in batches if ratios[b] > 1]
    cross = (f"ps {m} is faster at every batch size measured" if len(wins) == len(batches) else
             f"ps {m} is slower at every batch size measured" if not wins else
             f"ps {m} is faster up to batch {max(wins)}" if wins == batches[:len(wins)] else
             f"ps {m} is faster at batches {wins}")
    print(f"{m} / allreduce samples/s: " + ", ".join(f"batch {b} {r:.2f}" for b, r in ratios.items()) +
          f" — {cross}")
print(json.dumps(out))
PY
