"""docs/python.md is generated from the client's docstrings (sdk/python/tools/reference.py):
it must match them, and every public name must have one."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "reference.py")


def test_docs_python_md_is_generated_from_the_current_docstrings():
    run = subprocess.run([sys.executable, TOOL, "--check"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    assert run.returncode == 0, run.stdout.decode()
