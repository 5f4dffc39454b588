"""The op suites under each kernel set and convolution choice, each in a fresh process.

The default suite runs with ``NG_KERNELS=auto`` and ``NG_CONV=winograd`` (``tests/conftest.py``). Here the
op, nn-op, gather and CTC suites run again with the NumPy reference kernels only (``NG_KERNELS=numpy``),
and the nn-op and neon layer suites with every convolution computed one image at a time
(``NG_CONV=image``) and with every forward convolution of few output positions computed channels last
(``NG_CONV=channels_last``); slow-marked (``-m slow``): every fused program compiled (``NG_KERNELS=numba``, ~70 s)
and the measured choice (``NG_CONV=auto``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OP_SUITES = ["ngraph_core/test_ops.py", "ngraph_core/test_nn_ops.py", "ngraph_core/test_extra_ops.py",
             "ngraph_core/test_gather.py", "ngraph_core/test_ctc.py"]
CONV_SUITES = ["ngraph_core/test_nn_ops.py", "neon/layers"]


def run_suites(suites: list[str], tmp_path: Path, **env: str) -> None:
    environment = {**os.environ, "NG_CACHE_DIR": str(tmp_path), **env}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *(str(ROOT / s) for s in suites)]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_op_suites_pass_with_the_numpy_kernels(tmp_path):
    run_suites(OP_SUITES, tmp_path, NG_KERNELS="numpy")


def test_the_convolution_suites_pass_one_image_at_a_time(tmp_path):
    run_suites(CONV_SUITES, tmp_path, NG_CONV="image")


def test_the_convolution_suites_pass_channels_last(tmp_path):
    run_suites(CONV_SUITES, tmp_path, NG_CONV="channels_last")


@pytest.mark.slow
def test_the_op_suites_pass_with_every_fused_program_compiled(tmp_path):
    run_suites(OP_SUITES, tmp_path, NG_KERNELS="numba")


@pytest.mark.slow
def test_the_convolution_suites_pass_with_the_measured_choice(tmp_path):
    run_suites(CONV_SUITES, tmp_path, NG_CONV="auto")
