"""The CUDA source generated for fused programs, checked without a GPU.

Every element-wise case of the op table (``test_ops.FUSED_CASES``) becomes a fused program
(``case(...) * 1.5 + 0.25``) in float32 and float64, and so do the fused ops of three compiled
training graphs (an MLP with its momentum updates, an LSTM cell, a conv + bias + relu head). All
of them go into one translation unit that ``nvcc`` compiles (syntax and type errors surface here),
built as a shared library whose host loops run the generated arithmetic on the CPU: each case's
result must match the NumPy transformer's fused kernel. ``-m gpu`` tests run the same kernels
through ``cupy.ElementwiseKernel`` on a device (``tests/ngraph_core/test_backends.py``).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from nvcc_helper import build_library, needs_nvcc
from op_helper import make_inputs
from test_ops import FUSED_CASES

import ngraph_core as ng
from ngraph_core.passes.fusion import fuse_elementwise
from ngraph_core.transformers.cupy.elementwise import (
    SUPPORTED,
    CudaSource,
    cuda_source,
    translation_unit,
    unsupported_reason,
)

DTYPES = ("float32", "float64")


def _case_program(case):
    placeholders = [ng.placeholder(s.axes, dtype=s.dtype, name=f"in{i}") for i, s in enumerate(case.inputs)]
    (fused,) = fuse_elementwise([case.build(*placeholders) * 1.5 + 0.25])
    assert fused.op is ng.OpType.FUSED
    return fused, placeholders


def _model_programs() -> list[ng.Op]:
    """The fused ops of three compiled graphs: an MLP training step, an LSTM cell, a conv head."""
    C, N, H, K = ng.make_axis(6, "C"), ng.make_axis(4, "N"), ng.make_axis(5, "H"), ng.make_axis(3, "K")
    x = ng.placeholder([C, N], name="x")
    w1 = ng.variable([H, C], initial_value=0.1, name="w1")
    b1 = ng.variable([H], initial_value=0.0, name="b1")
    w2 = ng.variable([K, H], initial_value=0.1, name="w2")
    y = ng.placeholder([K, N], name="y")
    logits = ng.dot(w2, ng.relu(ng.dot(w1, x) + b1))
    loss = ng.cross_entropy_multi(ng.softmax(logits), y) / 4.0
    velocity = [ng.variable(v.axes, initial_value=0.0, name=f"v{i}") for i, v in enumerate((w1, b1, w2))]
    updates = []
    for var, vel, grad in zip((w1, b1, w2), velocity, ng.gradients(loss, [w1, b1, w2])):
        step = vel * 0.9 - grad * 0.01
        updates += [ng.assign(vel, step), ng.assign(var, var + step)]
    h = ng.variable([H, N], initial_value=0.5, name="h")
    cell = ng.sigmoid(ng.dot(ng.variable([H, C], initial_value=0.2, name="wi"), x) + b1) * ng.tanh(h) \
        + ng.sigmoid(h) * ng.tanh(h * 2.0)
    D, W, F = ng.make_axis(2, "D"), ng.make_axis(8, "W"), ng.make_axis(3, "F")
    image = ng.placeholder([C, D, W, N], name="image")
    kernel = ng.variable([C, ng.make_axis(2, "R"), F, K], initial_value=0.05, name="kernel")
    conv = ng.relu(ng.convolution(image, kernel, padding=(0, 1)) + 0.5)
    ops = []
    with ng.transformers.make_transformer() as t:
        for results, inputs in (([loss, ng.doall(updates)], [x, y]), ([cell], [x]), ([conv], [image])):
            ops += [op for op in t.computation(results, *inputs).graph.order if op.op is ng.OpType.FUSED]
    return ops


def test_every_case_program_is_supported() -> None:
    """No element-wise case falls back to the step-per-launch kernel, and every supported kind is exercised."""
    kinds = set()
    for case in FUSED_CASES:
        fused, _ = _case_program(case)
        for dtype in DTYPES:
            assert unsupported_reason(fused.arg, dtype) is None, case.id
        kinds |= {kind for kind, _ in fused.arg.steps}
    assert SUPPORTED <= kinds, f"kinds never generated: {sorted(k.value for k in SUPPORTED - kinds)}"


def test_source_shape() -> None:
    """Steps become const locals, constants exact hex literals, a head is read from out0 first."""
    a, b = ng.placeholder([ng.make_axis(3, "A")]), ng.placeholder([ng.make_axis(3, "A")])
    (fused,) = fuse_elementwise([ng.tanh(a * b + 0.1) - ng.maximum(a, b)])
    src = cuda_source(fused.arg, "float32")
    assert src.in_params == "float32 x0, float32 x1" and src.out_params == "float32 out0"
    assert "tanhf(" in src.operation and f"float({0.1.hex()})" in src.operation
    assert src.operation.splitlines()[-1].startswith("out0 = ")
    assert cuda_source(fused.arg, "float64").operation.count("tanh(") == 1
    assert cuda_source(fused.arg, "float32") == src  # deterministic: equal programs share one kernel
    assert unsupported_reason(fused.arg, "float16") is not None
    heads = [op for op in _model_programs() if op.arg.head is not None]
    assert {op.arg.head for op in heads} == {"dot", "conv"}
    for op in heads:
        head_src = cuda_source(op.arg, "float32")
        assert head_src.operation.startswith("const float d = out0;") and 0 not in head_src.inputs


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, dict]:
    """Every case and model program in both dtypes, built by nvcc into one shared library."""
    sources: dict[tuple[str, str], CudaSource] = {}
    for case in FUSED_CASES:
        fused, _ = _case_program(case)
        for dtype in DTYPES:
            sources[case.id, dtype] = cuda_source(fused.arg, dtype)
    for j, op in enumerate(_model_programs()):
        for dtype in DTYPES:
            sources[f"model{j}", dtype] = cuda_source(op.arg, dtype)
    unit = translation_unit(list(dict.fromkeys(sources.values())), host=True)
    return build_library(unit, tmp_path_factory.mktemp("cuda"), "fused"), sources


def _host_run(lib: ctypes.CDLL, src: CudaSource, values: list[np.ndarray], shape: tuple, dtype: str) -> np.ndarray:
    """The generated arithmetic over ``values`` (sources, broadcast to ``shape``), on the CPU."""
    inputs = [np.ascontiguousarray(np.broadcast_to(np.asarray(values[i], dtype=dtype), shape)) for i in src.inputs]
    out = np.empty(shape, dtype=dtype)
    pointers = [a.ctypes.data_as(ctypes.c_void_p) for a in inputs + [out]]
    getattr(lib, f"{src.name}_host")(*pointers, ctypes.c_longlong(out.size))
    return out


@needs_nvcc
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in FUSED_CASES])
def test_generated_kernel_matches_numpy(library: tuple[ctypes.CDLL, dict], case) -> None:
    """nvcc compiled the case's kernel, and its arithmetic gives what the NumPy fused kernel gives."""
    lib, sources = library
    fused, placeholders = _case_program(case)
    arrays = make_inputs(case.inputs)
    for dtype, tol in (("float32", 1e-5), ("float64", 1e-12)):
        feed = [a.astype(dtype) if s.dtype.startswith("float") else a for s, a in zip(case.inputs, arrays)]
        with ng.transformers.make_transformer(float_dtype=dtype) as t:
            values = t.computation(list(fused.src), *placeholders)(*feed)
            want = t.computation(fused, *placeholders)(*feed)
        got = _host_run(lib, sources[case.id, dtype], list(values), want.shape, dtype)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{case.id} {dtype}")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@needs_nvcc
def test_nan_and_infinity_semantics(tmp_path: Path) -> None:
    """maximum/minimum/relu propagate NaN, sign keeps it, mod takes the divisor's sign, infinite constants
    are exact: bit for bit what NumPy gives, one program per rule (a NaN in one would hide the others)."""
    A = ng.make_axis(7, "A")
    a, b = ng.placeholder([A], name="a"), ng.placeholder([A], name="b")
    inf = ng.constant(float("inf"))
    terms = [ng.maximum(a, b), ng.minimum(a, b), ng.relu(a), ng.sign(b), ng.mod(a, b), ng.sigmoid(a * -100.0),
             ng.minimum(a, inf) - ng.maximum(b, -inf), ng.where(a, a, b)]
    programs = [fuse_elementwise([term * 1.0 + 0.25])[0] for term in terms]
    sources = [cuda_source(p.arg, "float64") for p in programs]
    lib = build_library(translation_unit(sources, host=True), tmp_path, "nan", arch=None)
    av = np.array([np.nan, 1.0, -2.0, -0.0, 5.0, np.inf, -3.0])
    bv = np.array([1.0, np.nan, 2.0, 0.5, -2.0, 1.0, 2.0])
    with ng.transformers.make_transformer(float_dtype="float64") as t, np.errstate(invalid="ignore", over="ignore"):
        for fused, src in zip(programs, sources):
            assert fused.op is ng.OpType.FUSED
            values = t.computation(list(fused.src), a, b)(av, bv)
            want = t.computation(fused, a, b)(av, bv)
            got = _host_run(lib, src, list(values), want.shape, "float64")
            np.testing.assert_array_equal(got, want, err_msg=fused.arg.expression())
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=fused.arg.expression())
