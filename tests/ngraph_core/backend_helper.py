"""Run one graph on several backends and compare each with the NumPy transformer (the reference).

``BACKENDS`` is the parametrization every backend test uses: the CuPy-surface checker
(``transformers/cupy_surface.py``: CuPy 14.2's API on the CPU, so NumPy-only calls in shared
kernels fail here) and the real CuPy transformer, marked ``gpu`` (skipped, with the reason,
where no GPU is usable).

``run_on(backend, build, specs)`` builds the graph and runs it in one float dtype: the
float32 run feeds placeholders (the feed path) and calls the computation twice (kernels reuse
buffers); the float64 run builds over variables and also returns ``gradients(sum(out * R))``.
``compare_backends`` checks both runs against the NumPy transformer's.

Example:
    >>> compare_backends("cupy_surface", lambda x: ng.tanh(x), [arg(C, N)])
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from op_helper import SEED, Arg, make_inputs

import ngraph_core as ng

sys.path.insert(0, str(Path(__file__).parent / "transformers"))
from cupy_surface import register as register_cupy_surface  # noqa: E402

BACKENDS = [register_cupy_surface(), pytest.param("cupy", marks=pytest.mark.gpu)]
FLOAT64_TOL = 1e-9


@dataclass
class BackendRun:
    """One backend's results: the forward value, the inputs, and (float64 runs) the loss gradients."""

    forward: np.ndarray
    arrays: list[np.ndarray]
    grads: list[np.ndarray] = field(default_factory=list)


def _weights(out: ng.Op, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal(out.axes.lengths).astype(np.float32).astype(np.float64)


def _cast(spec: Arg, a: np.ndarray, float_dtype: str) -> np.ndarray:
    return a.astype(float_dtype) if spec.dtype.startswith("float") else a


def run_on(backend: str, build: Callable[..., ng.Op], specs: Sequence[Arg], *, float_dtype: str = "float32",
           grad: bool = True, seed: int = SEED, **options: Any) -> BackendRun:
    """``build`` run on ``backend`` with the seeded inputs of ``specs`` (``op_helper.make_inputs``).

    Args:
        backend: a registered backend name ("numpy", "cupy_surface", "cupy").
        build: ``build(*input_ops) -> Op``.
        specs: one ``arg(...)`` per input.
        float_dtype: "float32" (placeholders fed twice) or "float64" (variables, with gradients).
        grad: in float64, also return ``gradients(sum(out * R))`` for the differentiable inputs.
        **options: extra transformer options (``seed=``).

    Returns:
        the forward value (a NumPy array), the inputs, and the gradients.
    """
    arrays = make_inputs(specs, seed)
    with ng.transformers.make_transformer(backend, float_dtype=float_dtype, **options) as t:
        if float_dtype == "float32":
            placeholders = [ng.placeholder(s.axes, dtype=s.dtype, name=f"in{i}") for i, s in enumerate(specs)]
            f = t.computation(build(*placeholders), *placeholders)
            f(*[_cast(s, a, float_dtype) for s, a in zip(specs, make_inputs(specs, seed + 17))])
            return BackendRun(f(*[_cast(s, a, float_dtype) for s, a in zip(specs, arrays)]), arrays)
        variables = [ng.variable(s.axes, initial_value=a, dtype=s.dtype, name=f"in{i}")
                     for i, (s, a) in enumerate(zip(specs, arrays))]
        out = build(*variables)
        run = BackendRun(t.computation(out)(), arrays)
        wrt = [v for s, v in zip(specs, variables) if s.differentiable]
        if grad and wrt:
            loss = ng.sum(out * ng.constant(_weights(out, seed), out.axes, dtype="float32"))
            run.grads = [np.asarray(g) for g in t.computation(ng.gradients(loss, wrt))()]
        return run


def assert_same_run(got: BackendRun, want: BackendRun, backend: str, *, atol: float, rtol: float) -> None:
    """``got`` (``backend``) equals ``want`` (NumPy): type, dtype, shape, values and gradients."""
    assert isinstance(got.forward, np.ndarray), f"{backend} returned {type(got.forward).__name__}, not np.ndarray"
    assert type(got.forward) is np.ndarray, f"{backend} returned a subclass {type(got.forward).__name__}"
    assert got.forward.dtype == want.forward.dtype, f"{backend} gave {got.forward.dtype}, numpy {want.forward.dtype}"
    assert got.forward.shape == want.forward.shape
    np.testing.assert_allclose(got.forward, want.forward, atol=atol, rtol=rtol, err_msg=f"{backend} forward")
    assert len(got.grads) == len(want.grads)
    for i, (g, w) in enumerate(zip(got.grads, want.grads)):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape, f"gradient {i} on {backend}"
        np.testing.assert_allclose(g, w, atol=atol, rtol=rtol, err_msg=f"{backend} gradient {i}")


def compare_backends(backend: str, build: Callable[..., ng.Op], specs: Sequence[Arg], *, atol: float = 1e-5,
                     rtol: float = 1e-5, grad: bool = True, float64: bool = True, seed: int = SEED) -> None:
    """``build`` on ``backend`` against the NumPy transformer: float32 forward (``atol``/``rtol``, at least
    1e-5), then float64 forward and gradients of ``sum(out * R)`` (1e-9)."""
    atol, rtol = max(atol, 1e-5), max(rtol, 1e-5)
    want = run_on("numpy", build, specs, seed=seed)
    got = run_on(backend, build, specs, seed=seed)
    assert_same_run(got, want, backend, atol=atol, rtol=rtol)
    if float64:
        want = run_on("numpy", build, specs, float_dtype="float64", grad=grad, seed=seed)
        got = run_on(backend, build, specs, float_dtype="float64", grad=grad, seed=seed)
        assert_same_run(got, want, backend, atol=FLOAT64_TOL, rtol=FLOAT64_TOL)
