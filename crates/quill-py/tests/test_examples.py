"""The Python lessons in crates/quill-py/examples run to the end (each asserts its own results
against NumPy or closed forms); the MNIST one for a few steps, from the repository root where
data/mnist lives."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "crates" / "quill-py" / "examples"


@pytest.mark.parametrize("script,args", [("views.py", []), ("custom_op.py", []),
                                         ("mnist_mlp.py", ["20"])])
def test_example_runs(script, args):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "crates" / "quill-py" / "python")
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    last = r.stdout.strip().splitlines()[-1]
    assert ("ok" in last) or ("test accuracy after 20 steps" in last), r.stdout[-500:]
