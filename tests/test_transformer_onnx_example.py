"""The Transformer ONNX example (issue 35 item 7): the script and its notebook run in CI, so the docs cannot drift.

Both train the small ``transformer_sentiment`` network, export it (onnxruntime and the re-import must
match our outputs), and import PyTorch's exported ``nn.TransformerEncoder`` (it must match PyTorch).
The checks read the printed lines: accuracy above chance, every "max |difference|" under 1e-4, the
same predictions, and both ONNX files written. The notebook's staleness is checked with the others
by ``tests/test_walkthrough.py`` (``make_walkthrough.py --check``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_runner import run_notebook

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "transformer_onnx.py"
NOTEBOOK = ROOT / "notebooks" / "transformer_onnx.ipynb"
ACCURACY = re.compile(r"held-out accuracy: ([0-9.]+)%")
DIFFERENCE = re.compile(r"^(.*): max \|difference\| = ([0-9.e+-]+)$", re.MULTILINE)


def check_output(text: str, cwd: Path) -> None:
    found = ACCURACY.search(text)
    assert found, f"no 'held-out accuracy' line in the output:\n{text[-2000:]}"
    assert float(found.group(1)) >= 60.0, found.group(0)  # chance is 50%; the run reaches about 70%
    differences = dict((name, float(value)) for name, value in DIFFERENCE.findall(text))
    assert len(differences) == 4, f"expected 4 'max |difference|' lines, received {differences}\n{text[-2000:]}"
    assert all(value < 1e-4 for value in differences.values()), differences
    assert "same predictions: True" in text
    assert "Softmax nodes: ['" in text
    folder = cwd / "out" / "transformer_onnx"
    for name in ("transformer_sentiment.onnx", "torch_encoder.onnx"):
        onnx.checker.check_model(str(folder / name), full_check=True)


def test_script_exports_and_imports_a_transformer(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    check_output(done.stdout, tmp_path)


def test_notebook_executes(tmp_path: Path) -> None:
    check_output(run_notebook(NOTEBOOK, tmp_path), tmp_path)
