"""Scan gradients over mixed float widths (``autodiff/scan.py``'s dtype rule).

A step that reads a float32 weight over a float64 sequence (or any other mix) must
differentiate: each gradient the scan returns has its input's dtype, and its values match
central finite differences of a float64 NumPy loop within the narrowest dtype's precision.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ngraph_core as ng
from neon.layers import GRU, LSTM
from ngraph_core import DTypeError, Op, OpType
from ngraph_core.ir import promote

F, H, N = ng.make_axis(2, "F"), ng.make_axis(3, "H"), ng.make_axis(3, "N")
H2, REC = ng.make_axis(3, "H2"), ng.make_axis(4, "REC")
LENGTHS = np.array([4, 1, 3], dtype=np.int32)
TOL = {"float16": 5e-3, "float32": 2e-5, "float64": 1e-8}  # relative error of a gradient of that dtype
rng = np.random.default_rng(11)


def sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def np_scan(cell: Callable, x: np.ndarray, states: tuple[np.ndarray, ...], lengths: np.ndarray | None = None,
            reverse: bool = False) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """``(final states, stacked outputs [H, REC, N])`` of ``cell(x_t, states) -> (y, new states)`` in float64."""
    steps, batch = x.shape[1], x.shape[2]
    lengths = np.full(batch, steps) if lengths is None else lengths
    ys = np.zeros((states[0].shape[0], steps, batch))
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        y, new = cell(x[:, t], states)
        valid = (t < lengths)[None, :]
        states = tuple(np.where(valid, n, s) for n, s in zip(new, states))
        ys[:, t] = np.where(valid, y, 0.0)
    return states, ys


def numeric_grads(loss: Callable[[], float], arrays: list[np.ndarray], eps: float = 1e-6) -> list[np.ndarray]:
    """Central differences of ``loss()`` w.r.t. each float64 array, bumped in place."""
    grads = []
    for array in arrays:
        grad = np.zeros_like(array)
        for idx in np.ndindex(array.shape):
            keep = array[idx]
            array[idx] = keep + eps
            up = loss()
            array[idx] = keep - eps
            grad[idx] = (up - loss()) / (2 * eps)
            array[idx] = keep
        grads.append(grad)
    return grads


def check(got: list[np.ndarray], wrt: list[Op], want: list[np.ndarray], narrowest: str = "float64") -> None:
    """Each gradient has its input's dtype and matches ``want`` within that dtype's tolerance, or the
    ``narrowest`` dtype's the computation passed through."""
    for g, w, ref in zip(got, wrt, want, strict=True):
        assert g.dtype == np.dtype(w.dtype), w.name
        tol = max(TOL[w.dtype], TOL[narrowest])
        np.testing.assert_allclose(g, ref, rtol=tol, atol=tol * np.abs(ref).max(), err_msg=w.name)


def value(axes: list[ng.Axis], dtype: str, scale: float = 1.0) -> np.ndarray:
    """Random values exact in ``dtype`` (the NumPy reference then sees what the graph holds), as float64."""
    return (rng.standard_normal([a.length for a in axes]) * scale).astype(dtype).astype(np.float64)


def scans(ops: list[Op]) -> list[Op]:
    return [o for o in ng.ordered_ops(ops) if o.op is OpType.SCAN]


# -- the reproducer: an in-loop running sum of a float32 weight's gradient over float64 terms -------------


def test_a_float32_weight_read_by_a_float64_step_has_a_float32_gradient() -> None:
    x, h0 = ng.placeholder([F, REC, N], dtype="float64", name="x"), ng.placeholder([F, N], dtype="float64", name="h0")
    wv = value([F, N], "float32")
    w = ng.variable([F, N], initial_value=wv, dtype="float32", name="w")
    (h,), _ = ng.scan(lambda x_t, h: ([h], [ng.tanh(x_t * w + h)]), [x], [h0], REC)
    wrt = [w, x, h0]
    grads = ng.gradients(ng.sum(h), wrt)  # raised DTypeError: the running sum was float32, its terms float64
    assert [g.dtype for g in grads] == ["float32", "float64", "float64"]
    (backward,) = [s for s in scans(grads) if not s.arg.save_states]
    (acc,) = [p for p in backward.arg.body.params if p.name.startswith("sum_d_extra")]
    assert acc.dtype == "float64"  # the sum is as wide as its terms; cast to float32 once, after the loop
    xv, hv = value([F, REC, N], "float64"), value([F, N], "float64")
    with ng.transformers.make_transformer() as t:
        got = t.computation(grads, x, h0)(xv, hv)

    def loss() -> float:
        final, _ = np_scan(lambda x_t, s: (s[0], (np.tanh(x_t * wv + s[0]),)), xv, (hv,))
        return float(final[0].sum())

    check(got, wrt, numeric_grads(loss, [wv, xv, hv]))


# -- a tanh RNN (hoisted dots for W and U, an in-loop sum for b) over each mix of widths ------------------


@pytest.mark.parametrize("seq_dtype, weight_dtype", [
    ("float64", "float32"), ("float32", "float64"), ("float32", "float16"), ("float16", "float32")])
@pytest.mark.parametrize("lengths, reverse", [(False, False), (True, True)])
def test_rnn_gradients_have_the_inputs_dtypes_and_values(seq_dtype: str, weight_dtype: str, lengths: bool,
                                                         reverse: bool) -> None:
    state_dtype = promote(seq_dtype, weight_dtype)  # what the step computes in
    x = ng.placeholder([F, REC, N], dtype=seq_dtype, name="x")
    h0 = ng.placeholder([H, N], dtype=state_dtype, name="h0")
    wv, uv, bv = value([H, F], weight_dtype, 0.8), value([H, H2], weight_dtype, 0.5), value([H], weight_dtype)
    w = ng.variable([H, F], initial_value=wv, dtype=weight_dtype, name="W")
    u = ng.variable([H, H2], initial_value=uv, dtype=weight_dtype, name="U")
    b = ng.variable([H], initial_value=bv, dtype=weight_dtype, name="b")

    def step(x_t: Op, h: Op) -> tuple[list[Op], list[Op]]:
        new = ng.axes_with_order(ng.tanh(ng.dot(w, x_t) + ng.dot(u, ng.cast_axes(h, [H2, N])) + b), h.axes)
        return [new], [new]

    lens = ng.constant(LENGTHS, [N], dtype="int32") if lengths else None
    (final,), (ys,) = ng.scan(step, [x], [h0], REC, reverse=reverse, lengths=lens)
    r_ys, r_final = value([H, REC, N], "float64"), value([H, N], "float64")
    cost = ng.sum(ys * ng.constant(r_ys, ys.axes)) + ng.sum(final * ng.constant(r_final, final.axes))
    wrt = [x, h0, w, u, b]
    grads = ng.gradients(cost, wrt)
    xv, hv = value([F, REC, N], seq_dtype), value([H, N], state_dtype)
    with ng.transformers.make_transformer() as t:
        got = t.computation(grads, x, h0)(xv.astype(seq_dtype), hv.astype(state_dtype))

    def loss() -> float:
        def cell(x_t: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
            new = np.tanh(wv @ x_t + uv @ s[0] + bv[:, None])
            return new, (new,)
        (h,), hs = np_scan(cell, xv, (hv,), LENGTHS if lengths else None, reverse)
        return float((hs * r_ys).sum() + (h * r_final).sum())

    narrowest = min(seq_dtype, weight_dtype, key=lambda d: np.dtype(d).itemsize)
    check(got, wrt, numeric_grads(loss, [xv, hv, wv, uv, bv]), narrowest)


def test_one_float_dtype_adds_no_cast() -> None:
    x, h0 = ng.placeholder([F, REC, N], name="x"), ng.placeholder([H, N], name="h0")
    w, b = ng.variable([H, F], initial_value=0.5, name="W"), ng.variable([H], initial_value=0.1, name="b")
    (final,), _ = ng.scan(lambda x_t, h: ([h], [ng.tanh(ng.dot(w, x_t) + h + b)]), [x], [h0], REC)
    grads = ng.gradients(ng.sum(final), [x, h0, w, b])
    ops = ng.ordered_ops(grads)
    assert all(o.op is not OpType.CAST for o in ops + [b for s in scans(grads) for b in s.arg.body.order])


# -- neon's GRU and LSTM over a float64 sequence, float32 weights ---------------------------------------------


def np_gru(wx: np.ndarray, wh: np.ndarray, b: np.ndarray, bh: np.ndarray) -> Callable:
    """PyTorch's GRU step (gates r, z, n), the neon ``GRUCell``'s equations."""
    def cell(x_t: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        gx, gh = np.split(wx @ x_t + b[:, None], 3), np.split(wh @ s[0] + bh[:, None], 3)
        r, z = sigmoid(gx[0] + gh[0]), sigmoid(gx[1] + gh[1])
        new = (1 - z) * np.tanh(gx[2] + r * gh[2]) + z * s[0]
        return new, (new,)
    return cell


def np_lstm(wx: np.ndarray, wh: np.ndarray, b: np.ndarray) -> Callable:
    """PyTorch's LSTM step (gates i, f, g, o), the neon ``LSTMCell``'s equations."""
    def cell(x_t: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        i, f, g, o = np.split(wx @ x_t + wh @ s[0] + b[:, None], 4)
        c = sigmoid(f) * s[1] + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        return h, (h, c)
    return cell


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_neon_cell_over_a_float64_sequence_with_float32_weights(kind: str) -> None:
    x = ng.placeholder([F, REC, N], dtype="float64", name="x")
    layer = GRU(3, return_sequence=True) if kind == "GRU" else LSTM(3)
    out = layer(x, lengths=ng.constant(LENGTHS, [N], dtype="int32"))
    weights = layer.trainable_variables
    assert {v.dtype for v in weights} == {"float32"}
    r = value(out.axes, "float64")
    wrt = [x, *weights]
    grads = ng.gradients(ng.sum(out * ng.constant(r, out.axes)), wrt)  # the GRU's b_h raised DTypeError
    cell = layer.cell
    in_step = [cell.W_h] + ([cell.b_h] if kind == "GRU" else [])  # read inside the step: the scan's gradients
    assert all(g.dtype == "float32" for g, v in zip(grads, wrt) if any(v is w for w in in_step))
    xv = value([F, REC, N], "float64")
    with ng.transformers.make_transformer() as t:
        values = [t.read_variable(v).astype(np.float64) for v in weights]
        got = t.computation(grads, x)(xv)
    zeros = np.zeros((3, N.length))

    def loss() -> float:
        if kind == "GRU":
            _, hs = np_scan(np_gru(*values), xv, (zeros,), LENGTHS)
            return float((hs * r).sum())
        (h, _), _ = np_scan(np_lstm(*values), xv, (zeros, zeros), LENGTHS)
        return float((h * r).sum())

    # W_x and b are read outside the scan: the reverse walk gives them the float64 of their path
    got = [g.astype(v.dtype) for g, v in zip(got, wrt)]
    check(got, wrt, numeric_grads(loss, [xv, *values]), "float32")


# -- the forward: a float32 state over a float64 step -------------------------------------------------------


def test_a_float32_state_promoted_by_the_step_is_a_typed_error() -> None:
    x, h0 = ng.placeholder([F, REC, N], dtype="float64"), ng.placeholder([F, N], dtype="float32")
    with pytest.raises(DTypeError, match=r"new state 0 .* has dtype float64; expected float32.*hint: ng.cast"):
        ng.scan(lambda x_t, h: ([h], [ng.tanh(x_t + h)]), [x], [h0], REC)


def test_a_float32_state_cast_in_a_float64_step_differentiates() -> None:
    """The state stays float32 (the step casts it back), the step output is float64: the state's
    gradient is carried in float32, the sequence's and the output's in float64."""
    x, h0 = ng.placeholder([F, REC, N], dtype="float64", name="x"), ng.placeholder([F, N], dtype="float32", name="h0")
    wv = value([F, N], "float32")
    w = ng.variable([F, N], initial_value=wv, dtype="float32", name="w")

    def step(x_t: Op, h: Op) -> tuple[list[Op], list[Op]]:
        return [x_t * h], [ng.cast(ng.tanh(x_t * w + h), "float32")]

    (final,), (ys,) = ng.scan(step, [x], [h0], REC)
    assert (final.dtype, ys.dtype) == ("float32", "float64")
    r = value([F, REC, N], "float64")
    wrt = [x, h0, w]
    grads = ng.gradients(ng.sum(ys * ng.constant(r, ys.axes)) + ng.sum(final), wrt)
    xv, hv = value([F, REC, N], "float64"), value([F, N], "float32")
    with ng.transformers.make_transformer() as t:
        got = t.computation(grads, x, h0)(xv, hv)

    def loss() -> float:
        (h,), ys_ = np_scan(lambda x_t, s: (x_t * s[0], (np.tanh(x_t * wv + s[0]),)), xv, (hv,))
        return float((ys_ * r).sum() + h.sum())

    check(got, wrt, numeric_grads(loss, [xv, hv, wv]), "float32")  # the forward rounds the state every step
