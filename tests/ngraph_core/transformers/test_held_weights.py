"""Inference weights prepared once: constant operands of ``dot``, ``conv`` and Winograd kept in the layout
their kernel wants, the live taps of a convolution over padding, a constant ``gather`` id.

Each kernel keeps its prepared copy only while its source is the same constant array; the checks here
call a computation several times (the kept copy in use), and give a variable the same treatment to
show it is prepared again after every change.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir.conv import ConvArg
from ngraph_core.transformers.kernels.conv import live_taps
from ngraph_core.transformers.numpy import conv_choice

RNG = np.random.default_rng(11)


def conv_reference(x: np.ndarray, w: np.ndarray, padding: int) -> np.ndarray:
    """``[C, H, W, N]`` x ``[C, R, S, K]`` -> ``[K, Ho, Wo, N]``, stride 1, in float64 loops."""
    c, h, wd, n = x.shape
    _, r, s, k = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    ho, wo = h + 2 * padding - r + 1, wd + 2 * padding - s + 1
    out = np.zeros((k, ho, wo, n))
    for i in range(ho):
        for j in range(wo):
            out[:, i, j] = np.einsum("crsk,crsn->kn", w, xp[:, i:i + r, j:j + s])
    return out


def image_axes(c: int, h: int, w: int, n: int) -> list[ng.Axis]:
    return [ng.make_axis(c, "C"), ng.make_axis(h, "H"), ng.make_axis(w, "W"), ng.make_axis(n, "N")]


def filter_axes(c: int, k: int) -> list[ng.Axis]:
    return [ng.make_axis(c, "C"), ng.make_axis(3, "R"), ng.make_axis(3, "S"), ng.make_axis(k, "K")]


def test_live_taps():
    one = ConvArg((1, 1), ((1, 1), (1, 1)), (1, 1))
    assert live_taps((1, 1), (3, 3), one) == ((1, 1), (1, 1))  # a 1x1 map: the centre tap only
    assert live_taps((2, 2), (3, 3), one) is None  # every tap reads the map somewhere
    assert live_taps((2, 2), (3, 3), ConvArg((2, 2), ((1, 1), (1, 1)), (1, 1))) == ((1, 2), (1, 2))
    assert live_taps((2,), (5,), ConvArg((1,), ((4, 0),), (1,))) == ((3, 4),)
    assert live_taps((8, 8), (3, 3), ConvArg((1, 1), ((0, 0), (0, 0)), (1, 1))) is None


@pytest.mark.parametrize("lengths,n", [((1, 1), 2), ((2, 2), 1), ((4, 3), 3)])
def test_constant_and_variable_filters_give_the_reference(lengths, n):
    """A constant filter arrives as a reordered view (``[K, C, R, S]`` -> ``[C, R, S, K]``, as ONNX
    imports it): prepared once, right on every call. A variable filter written between calls is
    prepared again (the 1x1 map's cut of the centre tap, the 2x2 map's whole filter)."""
    c, k = 3, 4
    x = ng.placeholder(image_axes(c, *lengths, n))
    kcrs = RNG.standard_normal((k, c, 3, 3)).astype(np.float32)
    K, C, R, S = (ng.make_axis(m, name) for m, name in ((k, "K"), (c, "C"), (3, "R"), (3, "S")))
    stored = ng.constant(kcrs, [K, C, R, S])
    w_const = ng.axes_with_order(stored, [C, R, S, K])
    w_var = ng.variable(filter_axes(c, k), initial_value=kcrs.transpose(1, 2, 3, 0))
    xv = RNG.standard_normal((c, *lengths, n)).astype(np.float32)
    want = conv_reference(xv, kcrs.transpose(1, 2, 3, 0), 1)
    with ng.transformers.make_transformer() as t:
        f_const = t.computation(ng.convolution(x, w_const, padding=1), x)
        f_var = t.computation(ng.convolution(x, w_var, padding=1), x)
        for _ in range(3):
            np.testing.assert_allclose(f_const(xv), want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(f_var(xv), want, rtol=1e-5, atol=1e-5)
        # written in place, as an optimizer's update is: the same array object, new values
        new = ng.placeholder(filter_axes(c, k))
        update = t.computation(ng.doall([ng.assign(w_var, new)]), new)
        for _ in range(2):
            changed = RNG.standard_normal((c, 3, 3, k)).astype(np.float32)
            update(changed)
            np.testing.assert_allclose(f_var(xv), conv_reference(xv, changed, 1), rtol=1e-5, atol=1e-5)


def test_winograd_keeps_a_constant_filters_transform(monkeypatch):
    """``NG_CONV=winograd``: a constant filter is transformed once, a variable one on every call."""
    monkeypatch.setenv("NG_CONV", "winograd")
    c, k, n = 4, 5, 3
    x = ng.placeholder(image_axes(c, 6, 6, n))
    g = RNG.standard_normal((c, 3, 3, k)).astype(np.float32)
    w_const = ng.constant(g, filter_axes(c, k))
    w_var = ng.variable(filter_axes(c, k), initial_value=g)
    xv = RNG.standard_normal((c, 6, 6, n)).astype(np.float32)
    with ng.transformers.make_transformer() as t:
        f_const = t.computation(ng.convolution(x, w_const, padding=1), x)
        f_var = t.computation(ng.convolution(x, w_var, padding=1), x)
        for _ in range(3):
            np.testing.assert_allclose(f_const(xv), conv_reference(xv, g, 1), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(f_var(xv), conv_reference(xv, g, 1), rtol=1e-4, atol=1e-4)
        new = ng.placeholder(filter_axes(c, k))
        t.computation(ng.doall([ng.assign(w_var, new)]), new)(2 * g)  # in place
        np.testing.assert_allclose(f_var(xv), conv_reference(xv, 2 * g, 1), rtol=1e-4, atol=1e-4)


def test_weight_bound_layers_skip_the_winograd_measurement(monkeypatch, tmp_path):
    """``NG_CONV=auto``: a batch-1 2x2 map (one Winograd tile, fewer than ``MIN_COLUMNS`` columns) does not
    time Winograd (it times im2col against the channels-last kernel, when numba is there); a batch-8 one
    times Winograd and records it."""
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NG_CONV", raising=False)
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)
    assert conv_choice.MIN_COLUMNS == 8
    timed = []
    for n in (1, 8):
        x = ng.placeholder(image_axes(3, 2, 2, n))
        w = ng.constant(RNG.standard_normal((3, 3, 3, 4)).astype(np.float32), filter_axes(3, 4))
        with ng.transformers.make_transformer() as t:
            step = t.computation(ng.convolution(x, w, padding=1), x)
            for _ in range(conv_choice.CALLS_TO_DECIDE):  # one candidate timed a call
                step(np.ones((3, 2, 2, n), np.float32))
        path = tmp_path / "conv_choices.json"
        record = json.loads(path.read_text()) if path.exists() else {}
        timed.append({key.split(";")[0]: set(entry["ms"]) for key, entry in record.items()})
    assert "winograd" not in timed[0].get("conv|3x2x2x1", set())
    assert "winograd" in timed[1]["conv|3x2x2x8"]


def test_dot_with_a_constant_transposed_operand():
    """``dot(x, W)`` with ``W`` a constant stored ``[out, in]`` (transposed for the GEMM): made contiguous
    once, right on every call and for every batch."""
    F, H, N = ng.make_axis(32, "F"), ng.make_axis(24, "H"), ng.make_axis(9, "N")
    w = RNG.standard_normal((24, 32)).astype(np.float32)
    x = ng.placeholder([N, F])
    y = ng.dot(x, ng.constant(w, [H, F]))
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        for _ in range(3):
            xv = RNG.standard_normal((9, 32)).astype(np.float32)
            np.testing.assert_allclose(f(xv), xv @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index", [0, 3, 4, -1])
def test_gather_with_a_constant_id(monkeypatch, index):
    """One constant id: a row copy; out of range (4, -1) reads a zero row, as ``gather`` does."""
    from ngraph_core.transformers.kernels import gather as gather_kernels

    found: list[int | None] = []
    real = gather_kernels._constant_id
    monkeypatch.setattr(gather_kernels, "_constant_id", lambda op: found.append(real(op)) or found[-1])
    V, D = ng.make_axis(4, "V"), ng.make_axis(3, "D")
    table = ng.placeholder([V, D])
    row = ng.gather(table, ng.constant(index, [], dtype="int64"), V)
    tv = RNG.standard_normal((4, 3)).astype(np.float32)
    with ng.transformers.make_transformer() as t:
        f = t.computation(row, table)
        for _ in range(2):
            got = f(tv)
    want = tv[index] if 0 <= index < 4 else np.zeros(3, np.float32)
    np.testing.assert_array_equal(got, want)
    assert found == [index]  # the row-copy kernel was the one made
