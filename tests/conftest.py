"""Suite-wide settings: every compile in the tests verifies the graph after every pass
(docs/architecture.md, "The pass pipeline"), eligible convolutions run Winograd, compiled kernels are ready
at their first call, and tests marked ``gpu`` skip, saying why, where the CuPy transformer cannot run."""

import os

import pytest

os.environ.setdefault("NG_CHECK", "1")
# every eligible convolution (3x3, stride 1) in the suite runs the Winograd kernels; the default
# ("auto": a measured choice per layer) would make which kernel a test checks depend on timing.
# test_winograd.py checks both kernels against each other and PyTorch, and the auto choice.
os.environ.setdefault("NG_CONV", "winograd")
# numba kernels compile before their first call returns (the default, "background", runs the NumPy kernels
# until the background thread is done: which kernel a test checks would depend on timing).
# tests/ngraph_core/transformers/test_background_compile.py checks the background mode itself.
os.environ.setdefault("NG_COMPILE", "wait")

_gpu_reason: list[str | None] = []  # computed once: None when a GPU is usable


def gpu_unavailable() -> str | None:
    """Why the CuPy transformer cannot run here (no CuPy, no device, old driver), or None."""
    if not _gpu_reason:
        from ngraph_core.errors import BackendUnavailableError
        from ngraph_core.transformers.cupy import load_cupy

        try:
            load_cupy()
            _gpu_reason.append(None)
        except BackendUnavailableError as exc:
            _gpu_reason.append(str(exc))
    return _gpu_reason[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and (reason := gpu_unavailable()) is not None:
        skip = pytest.mark.skip(reason=f"no GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)
