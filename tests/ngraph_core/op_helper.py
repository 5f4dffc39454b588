"""The shared op-test helper (in the spirit of tinygrad's ``helper_test_op``).

An op test is one call::

    check_op(lambda x: ng.exp(x), np.exp, [arg(C, N)])

``check_op`` builds the op from placeholders (float32 run) and from variables
(float64 run) with the same seeded inputs and checks

(a) the float32 forward on the NumPy transformer against the NumPy reference (after a
    first call on other inputs, and again on a repeated call: kernels reuse buffers),
(b) the output dtype (IR dtype and the returned array's dtype, on both runs),
(c) the gradient of ``loss = sum(out * R)`` (R a fixed random constant) taken by
    ``ng.gradients`` in float64 against central finite differences of the same
    loss, computed by re-running OUR float64 forward with each variable element
    perturbed through ``t.write_variable`` (so the float64 forward is validated
    against the reference too).

``check_op_torch`` (called from a separate test so it can skip) compares the float64
forward and gradients with PyTorch autograd on the same inputs and the same R; it
calls ``pytest.importorskip("torch")`` so without PyTorch it reports a skip, never a pass.
``check_fused`` runs an element-wise op as a step of a ``fused`` program (the fusion pass).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import ngraph_core as ng

SEED = 1234


@dataclass(frozen=True)
class Arg:
    """How to make one input of an op test.

    Attributes:
        axes: the input's axes (placeholder / variable axes).
        low, high: uniform range of random values (float inputs).
        values: fixed values instead of random ones (any dtype).
        dtype: "float32" (differentiated) or an int/bool dtype (data, never differentiated).
        diff: differentiate with respect to this input (default: float inputs).
        avoid: for float inputs, resample values closer than this to 0 (kinks: relu, abs, sign).
    """

    axes: tuple
    low: float = -2.0
    high: float = 2.0
    values: Any = None
    dtype: str = "float32"
    diff: bool | None = None
    avoid: float = 0.0

    @property
    def differentiable(self) -> bool:
        return self.dtype.startswith("float") if self.diff is None else self.diff


def arg(*axes: ng.Axis, low: float = -2.0, high: float = 2.0, values: Any = None, dtype: str = "float32",
        diff: bool | None = None, avoid: float = 0.0, positive: bool = False) -> Arg:
    """An input spec: ``arg(C, N)`` random in [-2, 2); ``positive=True`` gives [0.5, 2)."""
    if positive:
        low, high = 0.5, 2.0
    return Arg(tuple(axes), low, high, values, dtype, diff, avoid)


def make_inputs(specs: Sequence[Arg], seed: int = SEED) -> list[np.ndarray]:
    """Seeded input arrays: floats are float32-representable values held as float64."""
    rng = np.random.default_rng(seed)
    arrays = []
    for s in specs:
        shape = tuple(a.length for a in s.axes)
        if s.values is not None:
            a = np.asarray(s.values)
            assert a.shape == shape, f"values of shape {a.shape} for axes {shape}"
            a = a.astype(s.dtype)
        elif s.dtype.startswith("float"):
            a = rng.uniform(s.low, s.high, shape)
            while s.avoid and np.any(np.abs(a) < s.avoid):
                bad = np.abs(a) < s.avoid
                a[bad] = rng.uniform(s.low, s.high, int(bad.sum()))
        else:
            a = rng.integers(int(s.low), int(s.high), shape).astype(s.dtype)
        if s.dtype.startswith("float"):
            a = a.astype(np.float32).astype(np.float64)
        arrays.append(a)
    return arrays


def _cast_for(spec: Arg, a: np.ndarray, float_dtype: str) -> np.ndarray:
    return a.astype(float_dtype) if spec.dtype.startswith("float") else a


def _op_types(out: ng.Op) -> set[ng.OpType]:
    return {o.op for o in ng.ordered_ops([out])}


def _random_weights(out: ng.Op, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal(out.axes.lengths).astype(np.float32).astype(np.float64)


@dataclass
class Float64Run:
    """What the float64 run computed: inputs, forward, R, loss gradients (ours) and their variables."""

    arrays: list[np.ndarray]
    forward: np.ndarray
    weights: np.ndarray | None = None
    grads: list[np.ndarray] = field(default_factory=list)
    fd_grads: list[np.ndarray] = field(default_factory=list)
    diff_index: list[int] = field(default_factory=list)


def run_float64(build: Callable[..., ng.Op], specs: Sequence[Arg], grad: bool = True, fd: bool = True,
                fd_eps: float = 1e-6, seed: int = SEED) -> Float64Run:
    """Build over variables, run forward and ``gradients(sum(out * R))`` in float64, and FD of our forward."""
    arrays = make_inputs(specs, seed)
    variables = [ng.variable(s.axes, initial_value=a, dtype=s.dtype, name=f"in{i}")
                 for i, (s, a) in enumerate(zip(specs, arrays))]
    out = build(*variables)
    run = Float64Run(arrays, np.empty(()))
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        run.forward = t.computation(out)()
        if not grad:
            return run
        diff = [i for i, s in enumerate(specs) if s.differentiable]
        run.diff_index = diff
        run.weights = _random_weights(out, seed)
        loss = ng.sum(out * ng.constant(run.weights, out.axes, dtype="float32"))
        wrt = [variables[i] for i in diff]
        if wrt:
            results = t.computation(ng.gradients(loss, wrt))()
            run.grads = [np.asarray(g) for g in results]
        if not fd:
            return run
        loss_fn = t.computation(loss)
        for i in diff:
            var, base = variables[i], arrays[i]
            fd_grad = np.zeros_like(base)
            for idx in np.ndindex(base.shape):
                bumped = base.copy()
                bumped[idx] = base[idx] + fd_eps
                t.write_variable(var, bumped)
                up = float(loss_fn())
                bumped[idx] = base[idx] - fd_eps
                t.write_variable(var, bumped)
                down = float(loss_fn())
                fd_grad[idx] = (up - down) / (2 * fd_eps)
            t.write_variable(var, base)
            run.fd_grads.append(fd_grad)
    return run


def check_op(build: Callable[..., ng.Op], ref: Callable[..., Any] | None, inputs: Sequence[Arg], *,
             grad: bool = True, dtype: str = "float32", covers: Sequence[ng.OpType] = (),
             atol: float = 1e-5, rtol: float = 1e-5, grad_atol: float = 1e-7, grad_rtol: float = 1e-6,
             expected_grads: Callable[..., Sequence[np.ndarray]] | None = None,
             fd_eps: float = 1e-6, seed: int = SEED, torch_fn: Any = None) -> Float64Run:
    """Check an op's forward (float32 and float64), dtype and gradient (finite differences, float64).

    Args:
        build: ``build(*input_ops) -> Op``; called once over placeholders, once over variables.
        ref: NumPy reference of the forward, called with the float64 input arrays
            (None: no reference; only gradients and dtype are checked).
        inputs: one ``arg(...)`` per input.
        grad: check gradients (float inputs, or those with ``diff=True``).
        dtype: the expected output dtype (of the IR op, and of the float32 run's array).
        covers: OpTypes the built graph must contain (keeps the coverage table honest).
        expected_grads: ``(arrays, R) -> grads`` replacing finite differences (custom or zero gradients).
        torch_fn: also compare with PyTorch (``check_op_torch``) after the checks above; without
            PyTorch the test then reports a skip. ``test_ops.py`` calls ``check_op_torch`` from a
            separate test instead, so the NumPy checks always report on their own.

    Returns:
        the float64 run (inputs, forward, gradients), for extra assertions.
    """
    arrays = make_inputs(inputs, seed)
    placeholders = [ng.placeholder(s.axes, dtype=s.dtype, name=f"in{i}") for i, s in enumerate(inputs)]
    out = build(*placeholders)
    assert isinstance(out, ng.Op), f"build returned {type(out).__name__}, expected an Op"
    missing = set(covers) - _op_types(out)
    assert not missing, f"the built graph lacks {sorted(t.value for t in missing)}:\n{ng.format_graph([out])}"
    assert out.dtype == dtype, f"IR dtype {out.dtype}, expected {dtype}"
    expected = None if ref is None else np.asarray(ref(*arrays))
    if expected is not None:
        assert expected.shape == out.axes.lengths, f"reference shape {expected.shape} vs axes {out.axes}"

    # (a) + (b): float32 forward and dtype; a first call on other inputs must leave no trace
    # in the second (kernels reuse their output buffers across calls)
    feed = [_cast_for(s, a, "float32") for s, a in zip(inputs, arrays)]
    with ng.transformers.make_transformer() as t:
        f = t.computation(out, *placeholders)
        f(*make_inputs(inputs, seed + 17))
        got = f(*feed)
        np.testing.assert_array_equal(f(*feed), got, err_msg="a second call on the same inputs differs")
    assert isinstance(got, np.ndarray), f"float32 run returned {type(got).__name__}"
    assert got.dtype == np.dtype(dtype), f"float32 run gave {got.dtype}, expected {dtype}"
    assert got.shape == out.axes.lengths, f"float32 run shape {got.shape}, axes {out.axes}"
    if expected is not None:
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg="float32 forward vs NumPy")

    # (c): float64 forward, gradients vs finite differences of our own forward
    has_diff = grad and any(s.differentiable for s in inputs)
    run = run_float64(build, inputs, grad=has_diff, fd=expected_grads is None, fd_eps=fd_eps, seed=seed)
    want64 = "float64" if dtype == "float32" else dtype
    assert run.forward.dtype == np.dtype(want64), f"float64 run gave {run.forward.dtype}, expected {want64}"
    if expected is not None:
        tol = 1e-10 if dtype.startswith("float") else 0
        np.testing.assert_allclose(run.forward, expected, atol=tol, rtol=tol, err_msg="float64 forward vs NumPy")
    if has_diff:
        want = (list(expected_grads(run.arrays, run.weights)) if expected_grads is not None else run.fd_grads)
        assert len(run.grads) == len(want)
        for i, g, w in zip(run.diff_index, run.grads, want):
            assert g.shape == run.arrays[i].shape, f"gradient {i} shape {g.shape}, input {run.arrays[i].shape}"
            assert g.dtype == np.float64, f"gradient {i} dtype {g.dtype} in the float64 run"
            np.testing.assert_allclose(g, w, atol=grad_atol, rtol=grad_rtol,
                                       err_msg=f"gradient of input {i} vs "
                                       + ("expected" if expected_grads else "finite differences"))
    if torch_fn is not None:
        check_op_torch(build, torch_fn, inputs, grad=grad and expected_grads is None, seed=seed)
    return run


def check_op_torch(build: Callable[..., ng.Op], torch_fn: Callable[..., Any], inputs: Sequence[Arg], *,
                   grad: bool = True, atol: float = 1e-9, rtol: float = 1e-7, seed: int = SEED,
                   **_ignored: Any) -> None:
    """Compare our float64 forward and gradients with PyTorch autograd (skips without torch).

    ``torch_fn(*tensors)`` gets float64 tensors (int inputs as int64 tensors) in the inputs' axes
    order and must return a tensor laid out in the op's output axes order.
    """
    torch = pytest.importorskip("torch")
    has_diff = grad and any(s.differentiable for s in inputs)
    run = run_float64(build, inputs, grad=has_diff, fd=False, seed=seed)
    tensors = []
    for s, a in zip(inputs, run.arrays):
        if s.dtype.startswith("float"):
            tensors.append(torch.tensor(a, dtype=torch.float64, requires_grad=has_diff and s.differentiable))
        else:
            tensors.append(torch.tensor(a))
    y = torch_fn(*tensors)
    np.testing.assert_allclose(run.forward, y.detach().numpy(), atol=atol, rtol=rtol, err_msg="forward vs torch")
    if not has_diff:
        return
    if y.requires_grad:  # a torch_fn that detaches every input (stop_gradient) has zero gradients
        (y * torch.tensor(run.weights, dtype=torch.float64)).sum().backward()
    for i, g in zip(run.diff_index, run.grads):
        want = tensors[i].grad
        want = np.zeros_like(run.arrays[i]) if want is None else want.numpy()
        np.testing.assert_allclose(g, want, atol=atol, rtol=rtol, err_msg=f"gradient of input {i} vs torch")


def check_fused(build: Callable[..., ng.Op], ref: Callable[..., Any], inputs: Sequence[Arg], *,
                atol: float = 1e-5, rtol: float = 1e-5, seed: int = SEED, **_ignored: Any) -> None:
    """Run ``build(...) * 1.5 + 0.25`` through the element-wise fusion pass and check it against the reference.

    The tail makes the op under test an inner step of a ``fused`` program (a lone op is
    not fused); the fused graph runs in float32 and in float64.
    """
    from ngraph_core.passes.fusion import fuse_elementwise

    arrays = make_inputs(inputs, seed)
    placeholders = [ng.placeholder(s.axes, dtype=s.dtype, name=f"in{i}") for i, s in enumerate(inputs)]
    out = build(*placeholders)
    (fused,) = fuse_elementwise([out * 1.5 + 0.25])
    assert fused.op is ng.OpType.FUSED, f"not fused:\n{ng.format_graph([fused])}"
    assert out.op in {kind for kind, _ in fused.arg.steps}, (
        f"{out.op.value} is not a step of the fused program {fused.arg!r}"
    )
    expected = np.asarray(ref(*arrays)) * 1.5 + 0.25
    for float_dtype, tol in (("float32", (atol, rtol)), ("float64", (1e-10, 1e-10))):
        with ng.transformers.make_transformer(float_dtype=float_dtype) as t:
            got = t.computation(fused, *placeholders)(*[_cast_for(s, a, float_dtype) for s, a in zip(inputs, arrays)])
        assert got.dtype == np.dtype(float_dtype), f"fused {float_dtype} run gave {got.dtype}"
        np.testing.assert_allclose(got, expected, atol=tol[0], rtol=tol[1], err_msg=f"fused {float_dtype} forward")
