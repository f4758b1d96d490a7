"""The README's Python example runs as written: its first ```python block is executed in a
fresh namespace, and the MLP it trains must have learnt (every loss finite, the last well
below the first), so the README cannot drift from the package's API."""
import contextlib
import io
import math
import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def readme_python_block():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert m, "README.md has no ```python block"
    return m.group(1)


def test_readme_python_example_trains():
    code = readme_python_block()
    namespace = {"__name__": "__readme__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md (python block)", "exec"), namespace)

    losses = namespace["losses"]
    assert len(losses) >= 10
    assert all(math.isfinite(v) for v in losses), losses
    assert losses[-1] < 0.5 * losses[0], (losses[0], losses[-1])
    assert out.getvalue().strip() == f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
