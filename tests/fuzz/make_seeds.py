#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/ (run once; the files are
committed). Protobuf requests are encoded by hand: field tags, varints, length-delimited."""
import gzip
import io
import os
import struct
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- manifests
GOOD = ("name: smoke\nmodel: {architecture: mlp, hidden_units: [64]}\n"
        "data: {dataset: fashion-mnist, train_samples: 2000}\n"
        "training: {epochs: 2, batch_size: 64, optimizer: sgd, lr: 0.1}\n"
        "resources: {cpus: 1, memory_mb: 512, learners: 2}\n"
        "targets: {deliver: 0.8, complete: 0.9}\ncheckpoint: {every_steps: 50, keep: 2}\n")
put("manifest", "good.yaml", GOOD)
put("manifest", "cnn.json", '{"name": "c", "model": {"architecture": "cnn"}, '
    '"training": {"epochs": 1}, "priority": "high", "max_restarts": 2}')
put("manifest", "bad-types.yaml", "name: [1]\nmodel: 3\ntraining: {epochs: -1, lr: x}\n")
put("manifest", "anchors.yaml", "a: &a {architecture: mlp}\nname: x\nmodel: *a\n")
put("manifest", "utf8.yaml", "name: caf\xc3\xa9\ndescription: \"\\u001b[2J\"\n")
put("manifest", "command.yaml",
    "name: own-code\ncommand: [python3, train.py, --epochs, \"3\"]\ncode: fmnist-code\n"
    "data: {dataset: fashion-mnist}\ntraining: {threads: 1}\nresources: {learners: 2}\n"
    "targets: {deliver: 0.85}\ncheckpoint: {keep: 3}\n")
put("manifest", "elastic.yaml",
    "name: el\nmodel: {architecture: mlp}\ntraining: {epochs: 1}\n"
    "resources: {learners: {min: 1, max: 3}, cpus: 1}\n")

# --- REST: token byte, method byte, path, newline, body
TOKENS = {"none": 0, "admin": 1, "acme": 2, "globex": 3}
METHODS = {"GET": 0, "POST": 1, "PUT": 2, "PATCH": 3, "DELETE": 4}
REST = [
    ("submit", "acme", "POST", "/v1/jobs", GOOD),
    ("submit-json", "acme", "POST", "/v1/jobs", '{"name": "j", "model": {"architecture": "mlp"}}'),
    ("list", "acme", "GET", "/v1/jobs", ""),
    ("show", "acme", "GET", "/v1/jobs/@J", ""),
    ("show-other", "globex", "GET", "/v1/jobs/@J", ""),
    ("halt", "acme", "POST", "/v1/jobs/@J/halt", ""),
    ("resume", "acme", "POST", "/v1/jobs/@J/resume", ""),
    ("metrics", "acme", "GET", "/v1/jobs/@J/metrics?limit=10", ""),
    ("logs", "acme", "GET", "/v1/jobs/@J/logs?rank=0", ""),
    ("model", "acme", "GET", "/v1/jobs/@J/model?kind=delivered", ""),
    ("logs-follow", "acme", "GET", "/v1/jobs/@J/logs?follow=true", ""),
    ("job-events", "acme", "GET", "/v1/jobs/@J/events?after=1", ""),
    ("events", "globex", "GET", "/v1/events", ""),
    ("webhook-create", "acme", "POST", "/v1/webhooks",
     '{"url": "http://127.0.0.1:9000/hook", "events": ["DELIVERED", "COMPLETED"]}'),
    ("webhook-list", "acme", "GET", "/v1/webhooks", ""),
    ("webhook-delete", "globex", "DELETE", "/v1/webhooks/hook-0123456789", ""),
    ("delete", "acme", "DELETE", "/v1/jobs/@J", ""),
    ("tenants", "admin", "GET", "/v1/tenants", ""),
    ("tenant-create", "admin", "POST", "/v1/tenants",
     '{"name": "vision", "quota": {"cpus": 2, "memory_mb": 4096, "gpus": 0}, "weight": 2}'),
    ("tenant-update", "admin", "PATCH", "/v1/tenants/acme", '{"quota": null, "weight": 0.5}'),
    ("token-create", "admin", "POST", "/v1/tenants/acme/tokens", ""),
    ("token-revoke", "admin", "DELETE", "/v1/tenants/acme/tokens/tok-0", ""),
    ("queue", "acme", "GET", "/v1/queue", ""),
    ("nodes", "none", "GET", "/v1/nodes", ""),
    ("health", "none", "GET", "/healthz", ""),
    ("artifact-upload", "acme", "POST", "/v1/artifacts?name=cnn.pt", "torchscript bytes\x00\x01"),
    ("artifact-list", "acme", "GET", "/v1/artifacts", ""),
    ("artifact-show", "acme", "GET", "/v1/artifacts/cnn.pt", ""),
    ("artifact-content", "globex", "GET", "/v1/artifacts/cnn.pt/content", ""),
    ("artifact-delete", "acme", "DELETE", "/v1/artifacts/cnn.pt", ""),
    ("dataset-register", "admin", "POST", "/v1/datasets",
     '{"name": "scans", "path": "/usr/share/datasets/fashion-mnist", "format": "idx", '
     '"tenants": ["acme"]}'),
    ("dataset-list", "globex", "GET", "/v1/datasets", ""),
    ("dataset-show", "acme", "GET", "/v1/datasets/fashion-mnist", ""),
    ("dataset-delete", "admin", "DELETE", "/v1/datasets/scans", ""),
]
for name, token, method, path, body in REST:
    put("rest", name, bytes([TOKENS[token], METHODS[method]]) + (path + "\n" + body).encode())


# --- coordinator: call byte, flags byte (7: the World's job, credential and attempt 1), proto
def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, float):
        return varint(num << 3 | 1) + struct.pack("<d", value)
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


LEARNER = field(1, field(2, 0))  # rank 0; job, credential and attempt come from the flags
PROGRESS = field(1, 1) + field(2, 2) + field(3, 100) + field(4, 200) + field(5, 6400)
POINT = field(1, 100) + field(2, 1) + field(8, 1700000000000) + field(4, 0.5) + field(5, 900.0)
EVAL = POINT + field(6, 0.85) + field(7, 0.4)
COORD = [
    ("register", 0, LEARNER + field(2, 4242) + field(3, 1)),
    ("heartbeat", 1, LEARNER + field(2, PROGRESS)),
    ("metrics", 2, LEARNER + field(2, POINT) + field(2, EVAL) + field(3, PROGRESS)),
    ("model", 3, LEARNER + field(2, "delivered") + field(3, "/tmp/x/model.pt") +
     field(4, "/tmp/x/model-card.json") + field(5, 0.85) + field(6, 1) + field(7, 100) +
     field(8, 1234)),
    ("checkpoint", 4, LEARNER + field(2, "/tmp/x/ckpt-100.pt") + field(3, 1) + field(4, 100) +
     field(5, 999)),
    ("finished", 5, LEARNER + field(2, 1) + field(3, "target met") + field(4, 0.91)),
]
for name, call, msg in COORD:
    put("coordinator", name, bytes([call, 7]) + msg)
    put("coordinator", name + "-stranger", bytes([call, 0]) + msg)


# --- IDX
def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


put("idx", "images", idx([3, 2, 2], bytes(range(12))))
put("idx", "labels", idx([4], bytes([1, 2, 3, 9])))
put("idx", "images.gz", gzip.compress(idx([2, 3], bytes(6))))
put("idx", "truncated", idx([5, 28, 28], bytes(10)))


# --- the csv data set format (train/csv.h)
put("csv", "good.csv", "x1,x2,label\n0.5,1.5,3\n-2,1e3,0\n\n4, 5 ,9\r\n")
put("csv", "bad-label.csv", "a,label\n1,10\n")
put("csv", "bad-cell.csv", "a,b,label\n1,nan,2\n1,inf,2\n")
put("csv", "columns.csv", "a,b,label\n1,2\n")
put("csv", "no-label.csv", "a,b\n1,2\n")
put("csv", "huge.csv", "a,label\n1e300,1\n")


# --- a command job's metrics lines (train/command_events.h)
put("command_events", "metrics.json",
    '{"step": 120, "epoch": 1, "train_loss": 0.41, "samples_per_s": 950.5, "samples": 7680, '
    '"epochs_total": 3, "steps_total": 300}')
put("command_events", "eval.json", '{"step": 120, "epoch": 1, "test_accuracy": 0.86, "test_loss": 0.4}')
put("command_events", "checkpoint.json", '{"checkpoint": "ckpt/step-40.pt", "step": 40, "epoch": 0}')
put("command_events", "model.json",
    '{"model": "/data/jobs/job-1/work/rank-0/model.pt", "test_accuracy": 0.86, "step": 120}')
put("command_events", "bad.json", '{"model": "../x", "test_accuracy": 1e400, "step": -1}')


# --- image archives (control/image_archive.h): tar headers, plain or gzipped, written
# reproducibly (fixed times, gzip without a time stamp)
def tar(entries, fmt=tarfile.USTAR_FORMAT):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
        for name, body in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if body is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(body)
                t.addfile(info, io.BytesIO(body))
    # Without the padding to 10 KiB that tarfile adds: the entries and the two zero blocks.
    data = out.getvalue().rstrip(b"\0")
    return data + b"\0" * (-len(data) % 512 + 1024)


put("image_archive", "oci.tar",
    tar([("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", b"{}"),
         ("blobs/", None)]))
put("image_archive", "docker.tar", tar([("manifest.json", b"[]"), ("abc/layer.tar", b"")]))
put("image_archive", "rootfs.tar.gz",
    gzip.compress(tar([("./", None), ("./usr/", None), ("./etc/hostname", b"x\n")]), mtime=0))
put("image_archive", "longname.tar",
    tar([("d" * 150 + "/x", b"1"), ("bin/", None)], fmt=tarfile.GNU_FORMAT))
put("image_archive", "pax.tar", tar([("e" * 120, b""), ("notes.txt", b"hi")], fmt=tarfile.PAX_FORMAT))
