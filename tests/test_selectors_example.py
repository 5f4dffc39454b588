"""The selectors example (issue 11): the script and its notebook run in CI, so the docs cannot drift.

The script freezes ``Conv > Pool variable`` and must report those weights bit-identical after
two epochs, tap ``conv1`` and plot its maps, draw the graph with the selection highlighted,
and still learn (held-out accuracy well above chance). Both run in a temporary folder: the
example writes its pictures under ``out/`` of the working directory.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_runner import run_notebook

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "selectors_tour.py"
NOTEBOOK = ROOT / "notebooks" / "selectors.ipynb"
ACCURACY = re.compile(r"held-out accuracy: ([0-9.]+)%")

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is missing (make test installs it)")


def check_output(text: str, out: Path) -> None:
    found = ACCURACY.search(text)
    assert found, f"no 'held-out accuracy' line in the output:\n{text[-2000:]}"
    assert float(found.group(1)) >= 80.0, found.group(0)  # chance is 10%
    assert "frozen weights bit-identical after training: True" in text
    assert "Conv > Pool variable: ['" in text
    assert (out / "conv1_maps.png").read_bytes().startswith(b"\x89PNG")
    assert "<svg" in (out / "selectors_graph.svg").read_text()


@needs_dot
def test_script_freezes_taps_and_draws(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    check_output(done.stdout, tmp_path / "out")


@needs_dot
def test_notebook_executes(tmp_path: Path) -> None:
    check_output(run_notebook(NOTEBOOK, tmp_path), tmp_path / "out")
