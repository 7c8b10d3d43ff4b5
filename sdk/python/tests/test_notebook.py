"""examples/notebooks/fashion-mnist.ipynb, executed headless (Debian's jupyter-nbconvert) against
a real weftd, in its quick form (WEFT_NOTEBOOK_QUICK=1), so that the notebook cannot rot: every
cell must run, the plots must render, and its own check (the delivered model scored in the
notebook agrees with weft's figure) must hold. ctest runs this file as python_notebook_test."""
import json
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
NOTEBOOK = os.path.join(REPO, "examples", "notebooks", "fashion-mnist.ipynb")


def outputs_of(notebook):
    """Each code cell's outputs, in order."""
    return [cell.get("outputs", []) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def text_of(outputs):
    return "".join("".join(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")


def test_the_notebook_runs_end_to_end_against_weftd(weftd, tmp_path):
    nbconvert = shutil.which("jupyter-nbconvert")
    assert nbconvert, "jupyter-nbconvert is missing (scripts/install-deps.sh installs it)"
    env = dict(os.environ,
               WEFT_SERVER=weftd.server, WEFT_TOKEN=weftd.token, WEFT_NOTEBOOK_QUICK="1",
               PYTHONPATH=os.path.join(REPO, "sdk", "python"),
               # Jupyter's and IPython's own files stay in the test's directory.
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), IPYTHONDIR=str(tmp_path / "ipython"),
               MPLCONFIGDIR=str(tmp_path / "matplotlib"), PYDEVD_DISABLE_FILE_VALIDATION="1")
    run = subprocess.run(
        [nbconvert, "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=600",
         "--output-dir", str(tmp_path), NOTEBOOK],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    log = run.stdout.decode("utf-8", "replace")
    assert run.returncode == 0, log[-6000:]

    with open(tmp_path / "fashion-mnist.ipynb") as f:
        executed = json.load(f)
    cells = outputs_of(executed)
    assert cells, "no code cells"
    for outputs in cells:
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert not errors, errors
    # The live plot of the CNN, the two learning rates and the predictions are drawn.
    images = sum(1 for outputs in cells for o in outputs if "image/png" in o.get("data", {}))
    assert images >= 3, "%d plots rendered" % images
    everything = "".join(text_of(outputs) for outputs in cells)
    assert "cnn-lr-1e-3  COMPLETED" in everything, everything[-3000:]
    assert "cnn-lr-1e-2  COMPLETED" in everything, everything[-3000:]
    assert "scored here on the same images" in everything, everything[-3000:]
    # The three jobs are weftd's, COMPLETED, each with the model it delivered.
    jobs = weftd.client().jobs()
    names = sorted(job.info["name"] for job in jobs if job.info.get("name", "").startswith("cnn-")
                   or job.info.get("name") == "fashion-mnist-cnn")
    assert names == ["cnn-lr-1e-2", "cnn-lr-1e-3", "fashion-mnist-cnn"], names
    for job in jobs:
        info = job.refresh()
        if info["name"] in names:
            assert info["state"] == "COMPLETED", info
            assert "delivered" in info["models"], info["models"]
