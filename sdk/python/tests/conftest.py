"""A real weftd for the client's tests: started from the build (WEFT_BIN_DIR, default
../../build/bin), on a free loopback port and a data directory of its own, with a token of
tenant `default`."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package from the source tree

import weft  # noqa: E402

BIN_DIR = os.environ.get("WEFT_BIN_DIR") or os.path.join(HERE, "..", "..", "..", "build", "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Weftd:
    """One weftd process, restartable on the same port and data directory."""

    def __init__(self, work):
        self.work = work
        self.data_dir = os.path.join(work, "data")
        self.port = free_port()
        self.server = "127.0.0.1:%d" % self.port
        self.process = None
        self.log = open(os.path.join(work, "weftd.log"), "ab")
        self.token = None

    def start(self):
        argv = [os.path.join(BIN_DIR, "weftd"), "--data-dir", self.data_dir, "--listen",
                self.server, "--first-job-uid",
                str(1000000000 + (os.getpid() % 10000) * 65536)]
        if os.environ.get("WEFT_TEST_RUNTIME"):
            argv += ["--runtime", os.environ["WEFT_TEST_RUNTIME"]]
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("weftd exited %d; see %s/weftd.log"
                                   % (self.process.returncode, self.work))
            try:
                with urllib.request.urlopen("http://%s/healthz" % self.server, timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("weftd did not answer in 60 s")
        if self.token is None:
            self.token = self.admin().create_token("default")

    def admin(self):
        with open(os.path.join(self.data_dir, "admin.token")) as f:
            return weft.Client(self.server, f.read().strip())

    def client(self, token=None):
        return weft.Client(self.server, token or self.token)

    def kill(self):
        """kill -9, as a crash."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="session")
def weftd():
    if not os.path.exists(os.path.join(BIN_DIR, "weftd")):
        pytest.fail("no weftd in %s (build first, or set WEFT_BIN_DIR)" % BIN_DIR)
    work = tempfile.mkdtemp(prefix="weft-python-")
    server = Weftd(work)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(work, ignore_errors=True)


# An MLP on 3,000 images, evaluated on 1,000: done in well under a minute on 2 cores.
SMOKE = {
    "name": "python-smoke",
    "model": {"architecture": "mlp", "hidden_units": [64]},
    "data": {"dataset": "fashion-mnist", "train_samples": 3000, "test_samples": 1000},
    "training": {"epochs": 1, "batch_size": 64, "eval_every_steps": 20, "threads": 1},
    "resources": {"cpus": 1, "memory_mb": 1024},
    "targets": {"deliver": 0.5, "complete": 0.99},
}
