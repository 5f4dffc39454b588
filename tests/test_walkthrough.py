"""The executable walkthrough (STYLE habit 15): the script and its notebook run in CI, so the docs cannot drift.

The script must exit 0 and print a held-out accuracy of at least 95%; the notebook,
generated from the script, must be up to date and execute without an error cell.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from notebook_runner import run_notebook

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "walkthrough.py"
GENERATOR = ROOT / "notebooks" / "make_walkthrough.py"
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"
ACCURACY = re.compile(r"held-out accuracy: ([0-9.]+)%")


def check_accuracy(text: str) -> None:
    found = ACCURACY.search(text)
    assert found, f"no 'held-out accuracy' line in the output:\n{text[-2000:]}"
    assert float(found.group(1)) >= 95.0, found.group(0)


def test_script_trains_to_95_percent() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    check_accuracy(done.stdout)
    assert "AxesError:" in done.stdout
    assert "def computation(" in done.stdout


def test_notebook_is_generated_from_the_script() -> None:
    done = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_notebook_executes() -> None:
    check_accuracy(run_notebook(NOTEBOOK, ROOT))
