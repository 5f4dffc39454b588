"""Building generated CUDA source with ``nvcc`` into a shared library the tests call through ``ctypes``.

The CUDA tests check generated kernels on a machine without a GPU: each source has host loops over the
same ``__host__ __device__`` bodies, built here with ``nvcc -shared`` (syntax and type errors surface as a
failed build, with nvcc's message) and run on the CPU.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA compiler) is not on PATH")


def build_library(source: str, folder: Path, name: str, arch: str | None = "sm_90") -> ctypes.CDLL:
    """``source`` compiled by nvcc into ``folder/name.so`` and loaded; fails the test with nvcc's errors."""
    unit = folder / f"{name}.cu"
    unit.write_text(source)
    command = [NVCC, "-shared", "-Xcompiler", "-fPIC", *([f"-arch={arch}"] if arch else []),
               "-o", str(folder / f"{name}.so"), str(unit)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"nvcc rejected the generated {name} source:\n{built.stderr[-4000:]}"
    return ctypes.CDLL(str(folder / f"{name}.so"))
