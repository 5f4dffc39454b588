"""One test per ``OpType``: forward vs NumPy, dtype, gradient vs finite differences (float64) and vs PyTorch.

``CASES`` is the table; each case names the ``OpType``s its graph must contain, and
``COVERAGE`` (read by ``test_tables.py``) maps every ``OpType`` to the cases and
dedicated tests (random, leaves, side effects) that exercise it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ctc_reference as ctc_ref
import nn_reference as nn_ref
import numpy as np
import pytest
import scan_reference as scan_ref
from extra_op_cases import extra_cases, np_erf
from op_helper import Arg, arg, check_fused, check_op, check_op_torch

import ngraph_core as ng
from ngraph_core import OpGroup
from ngraph_core import OpType as T
from ngraph_core.ir import make

try:
    import torch
except ImportError:  # the torch tests skip (importorskip); the NumPy/FD tests still run
    torch = None

C, N, H, K, Y, W = (ng.make_axis(n, name) for n, name in ((3, "C"), (4, "N"), (5, "H"), (2, "K"), (5, "Y"), (6, "W")))
C2, N2 = ng.make_axis(3, "C2"), ng.make_axis(4, "N2")
C5, N_2, F = ng.make_axis(5, "C"), ng.make_axis(2, "N"), ng.make_axis(15, "F")

_fixed = np.random.default_rng(7)
TIES_CN = _fixed.integers(0, 3, (3, 4)).astype(np.float64)  # small integers: comparisons see equal values
TIES_N = _fixed.integers(0, 3, (4,)).astype(np.float64)
MASK_CN = _fixed.integers(0, 2, (3, 4)).astype(np.float64)
LABELS = np.array([0, 3, 4, 1])
ONE_HOT_YN = np.eye(5)[LABELS].T.copy()
MAX_TIES = np.array([[1.0, 2.0, 0.5, -1.0], [1.0, 0.0, 0.5, 3.0], [0.0, 2.0, 0.5, 3.0]])
BIG = np.array([[100.0, -100.0, 30.0, -0.5], [-100.0, 100.0, 0.7, 99.0], [50.0, -60.0, -1.3, 100.0],
                [0.2, 1.5, -100.0, -99.0], [-3.0, 80.0, 2.5, 0.1]])


# images [C, H, W, N] and filters [Ci, R, S, K] for the neural-network cases
R3, S2, K6, CI1 = ng.make_axis(3, "R"), ng.make_axis(2, "S"), ng.make_axis(6, "K"), ng.make_axis(1, "Ci")
IMAGE = arg(C, H, W, N_2)
POOL_TIES = _fixed.integers(0, 3, (3, 5, 6, 2)).astype(np.float64)


def nchw(t: Any) -> Any:
    """A torch tensor [C, H, W, N] as NCHW (and a filter [Ci, R, S, K] as PyTorch's (K, Ci, R, S))."""
    return t.permute(3, 0, 1, 2)


def chwn(t: Any) -> Any:
    """A torch NCHW tensor as [C, H, W, N]."""
    return t.permute(1, 2, 3, 0)


def filter_gradient(x: ng.Op, dy: ng.Op) -> ng.Op:
    """d sum(conv(x, w) * dy) / dw: a conv_bprop_filter of x and dy (w's value does not matter)."""
    w = ng.variable([C, R3, S2, K], initial_value=0.0)
    return ng.deriv(ng.sum(ng.convolution(x, w, strides=(2, 1), padding=1) * dy), w)


def torch_filter_gradient(x: Any, dy: Any) -> Any:
    w = torch.zeros((2, 3, 3, 2), dtype=torch.float64, requires_grad=True)
    y = F_().conv2d(nchw(x), w, stride=(2, 1), padding=1)
    return chwn(torch.autograd.grad((y * nchw(dy)).sum(), w, create_graph=True)[0])


def pool_gradient(x: ng.Op | None, dy: ng.Op, **kw: Any) -> ng.Op:
    """d sum(pool(x) * dy) / dx; with x None a fresh variable (avg pooling's gradient does not read x)."""
    x = ng.variable([C, H, W, N_2], initial_value=0.0) if x is None else x
    return ng.deriv(ng.sum(ng.pooling(x, **kw) * dy), x)


# CTC: logits [C, REC, N], padded labels [L, N] (a repeat "1 1" needs a blank between; length 0), lengths [N]
C4, REC5, N3, L3 = ng.make_axis(4, "C"), ng.make_axis(5, "REC"), ng.make_axis(3, "N"), ng.make_axis(3, "L")
CTC_INPUTS = [arg(C4, REC5, N3), arg(L3, N3, values=[[1, 3, 2], [1, 2, 0], [2, 1, 0]], dtype="int32"),
              arg(N3, values=[5, 4, 3], dtype="int32"), arg(N3, values=[2, 3, 0], dtype="int32")]
CTC_BLANK_3 = [arg(N3, REC5, C4), arg(N3, L3, values=[[1, 1, 3], [2, 0, 1], [0, 2, 2]], dtype="int32"),
               arg(N3, values=[5, 3, 5], dtype="int32"), arg(N3, values=[2, 3, 3], dtype="int32")]


def torch_ctc(x: Any, y: Any, il: Any, ll: Any, blank: int = 0, classes_last: bool = False) -> Any:
    """F.ctc_loss per example on logits [C, REC, N] (or [N, REC, C]) and labels [L, N] (or [N, L])."""
    lp = (x.permute(1, 0, 2) if classes_last else x.permute(1, 2, 0)).log_softmax(2)
    return F_().ctc_loss(lp, y if classes_last else y.T, il, ll, blank=blank, reduction="none")


def torch_ctc_gradient(x: Any, y: Any, il: Any, ll: Any) -> Any:
    x = x.detach().requires_grad_()
    return torch.autograd.grad(torch_ctc(x, y, il, ll).sum(), x, create_graph=True)[0]


def torch_pool_gradient(x: Any, dy: Any, fn: Callable, **kw: Any) -> Any:
    x = (torch.zeros((3, 5, 6, 2), dtype=torch.float64) if x is None else x.detach()).requires_grad_()
    return chwn(torch.autograd.grad((fn(nchw(x), **kw) * nchw(dy)).sum(), x, create_graph=True)[0].permute(3, 0, 1, 2))


# a case's xfail reason ("BUG: ...") -> the exception the bug raises; none is open now
BUG_RAISES: dict[str, type[BaseException]] = {}


def np_softmax(z: np.ndarray, axis: int = 0) -> np.ndarray:
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_logsumexp(z: np.ndarray, axis: int = 0) -> np.ndarray:
    m = z.max(axis, keepdims=True)
    return (m + np.log(np.exp(z - m).sum(axis, keepdims=True))).squeeze(axis)


def np_softplus(z: np.ndarray) -> np.ndarray:
    return np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))


def np_gather(table: np.ndarray, ids: np.ndarray, axis: int) -> np.ndarray:
    """``table``'s rows along ``axis`` at ``ids`` (zero rows out of range), the table's other axes first."""
    valid = (ids >= 0) & (ids < table.shape[axis])
    rows = np.moveaxis(np.take(table, np.where(valid, ids, 0), axis=axis), range(axis, axis + ids.ndim),
                       range(table.ndim - 1, table.ndim - 1 + ids.ndim))
    return rows * valid


def np_scatter_add(updates: np.ndarray, ids: np.ndarray, length: int) -> np.ndarray:
    """A zero table [rest, length] plus, at each in-range id, its column of ``updates`` [rest, *ids.shape]."""
    out = np.zeros((updates.shape[0], length))
    flat, cols = ids.reshape(-1), updates.reshape(updates.shape[0], -1)
    valid = (flat >= 0) & (flat < length)
    np.add.at(out, (slice(None), flat[valid]), cols[:, valid])
    return out


LOOKUP_IDS = np.array([[4, 0], [4, 2], [1, 4], [0, 0]])  # [N, K], ids into Y:5 with repeats
LOOKUP_IDS_OUT = np.array([[4, -1], [5, 2], [7, 4], [0, -3]])  # ... and out of range


def max_tie_grads(arrays: list[np.ndarray], r: np.ndarray) -> list[np.ndarray]:
    """Gradient of sum(max over C of x * R): R split equally among the tied maxima."""
    x = arrays[0]
    mask = (x == x.max(0, keepdims=True)).astype(float)
    return [mask / mask.sum(0, keepdims=True) * r[None, :]]


@ng.custom_gradient
def triple_grad(x: ng.Op) -> tuple[ng.Op, Callable]:
    return x * 1.0, lambda ctx: [ctx * 3.0]


@ng.custom_gradient
def two_input_grad(a: ng.Op, b: ng.Op) -> tuple[ng.Op, Callable]:
    return a * b, lambda ctx: [ctx * 2.0, ng.sum(ctx * 5.0, out_axes=b.axes)]


@dataclass(frozen=True)
class Case:
    id: str
    covers: tuple[T, ...]
    build: Callable[..., ng.Op]
    ref: Callable[..., Any] | None
    inputs: tuple[Arg, ...]
    torch_fn: Callable[..., Any] | None = None
    kw: dict = field(default_factory=dict)
    xfail: str | None = None
    xfail_torch: str | None = None


def case(id: str, covers: T | tuple[T, ...], build: Callable, ref: Callable | None, inputs: list[Arg],
         torch: Callable | None = None, xfail: str | None = None, xfail_torch: str | None = None, **kw: Any) -> Case:
    covers = covers if isinstance(covers, tuple) else (covers,)
    return Case(id, covers, build, ref, tuple(inputs), torch, kw, xfail, xfail_torch)


def F_():  # torch.nn.functional, looked up only when a torch test runs
    return torch.nn.functional


CN, POS = arg(C, N), arg(C, N, positive=True)
_SUB_IN = ng.placeholder([C, N], name="sub_in")
SUBGRAPH = ng.graph([_SUB_IN], ng.tanh(_SUB_IN) * _SUB_IN)  # f(p) = tanh(p) * p, applied by ng.call

CASES: list[Case] = [
    # -- leaves ------------------------------------------------------------------------------
    case("constant", T.CONSTANT, lambda: ng.constant(TIES_CN, [C, N]), lambda: TIES_CN, []),
    case("constant_times_input", T.CONSTANT, lambda x: x * ng.constant(MAX_TIES, [C, N]),
         lambda x: x * MAX_TIES, [CN], torch=lambda x: x * torch.tensor(MAX_TIES)),  # exact in float32
    case("placeholder_identity", T.PLACEHOLDER, lambda x: x, lambda x: x, [CN], torch=lambda x: x * 1),
    # -- element-wise unary -------------------------------------------------------------------
    case("neg", T.NEG, lambda x: -x, np.negative, [CN], torch=lambda x: -x),
    case("abs", T.ABS, lambda x: ng.abs(x), np.abs, [arg(C, N, avoid=0.05)], torch=lambda x: x.abs()),
    case("exp", T.EXP, ng.exp, np.exp, [CN], torch=lambda x: x.exp()),
    case("log", T.LOG, ng.log, np.log, [POS], torch=lambda x: x.log()),
    case("log1p", T.LOG1P, ng.log1p, np.log1p, [arg(C, N, low=-0.5, high=2.0)], torch=lambda x: x.log1p()),
    case("sqrt", T.SQRT, ng.sqrt, np.sqrt, [POS], torch=lambda x: x.sqrt()),
    case("rsqrt", T.RSQRT, ng.rsqrt, lambda x: 1 / np.sqrt(x), [POS], torch=lambda x: x.rsqrt()),
    case("square", T.SQUARE, ng.square, np.square, [CN], torch=lambda x: x.square()),
    case("reciprocal", T.RECIPROCAL, ng.reciprocal, np.reciprocal, [arg(C, N, avoid=0.3)],
         torch=lambda x: x.reciprocal()),
    case("tanh", T.TANH, ng.tanh, np.tanh, [CN], torch=lambda x: x.tanh()),
    case("sigmoid", T.SIGMOID, ng.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [arg(C, N, low=-6, high=6)],
         torch=lambda x: x.sigmoid()),
    case("sigmoid_huge", T.SIGMOID, ng.sigmoid, lambda x: 1 / (1 + np.exp(-x)), [arg(Y, N, values=BIG)],
         torch=lambda x: x.sigmoid()),
    case("relu", T.RELU, ng.relu, lambda x: np.maximum(x, 0), [arg(C, N, avoid=0.05)], torch=lambda x: x.relu()),
    case("relu_at_zero", T.RELU, ng.relu, lambda x: np.maximum(x, 0), [arg(C, N, values=TIES_CN - 1)],
         expected_grads=lambda xs, r: [r * (xs[0] > 0)], torch=lambda x: x.relu()),
    case("abs_at_zero", T.ABS, ng.abs, np.abs, [arg(C, N, values=TIES_CN - 1)],
         expected_grads=lambda xs, r: [r * np.sign(xs[0])], torch=lambda x: x.abs()),
    case("sign", T.SIGN, ng.sign, np.sign, [arg(C, N, avoid=0.05)], torch=lambda x: x.sign()),
    case("sin", T.SIN, ng.sin, np.sin, [arg(C, N, low=-4, high=4)], torch=lambda x: x.sin()),
    case("cos", T.COS, ng.cos, np.cos, [arg(C, N, low=-4, high=4)], torch=lambda x: x.cos()),
    case("stop_gradient", T.STOP_GRADIENT, ng.stop_gradient, lambda x: x, [CN],
         expected_grads=lambda xs, r: [np.zeros_like(xs[0])], torch=lambda x: x.detach()),
    case("stop_gradient_in_product", T.STOP_GRADIENT, lambda x: x * ng.stop_gradient(x), np.square, [CN],
         expected_grads=lambda xs, r: [xs[0] * r], torch=lambda x: x * x.detach()),
    case("cast_to_float64", T.CAST, lambda x: ng.cast(x, "float64"), lambda x: x, [CN], dtype="float64",
         torch=lambda x: x * 1),
    case("cast_to_int64", T.CAST, lambda x: ng.cast(x * 2.0, "int64"), lambda x: (x * 2).astype(np.int64),
         [CN], dtype="int64", grad=False),
    case("cast_int_roundtrip", T.CAST, lambda x: ng.cast(ng.cast(x * 2.0, "int64"), "float32"),
         lambda x: np.trunc(x * 2), [CN], torch=lambda x: (x * 2).to(torch.int64).to(torch.float64)),
    case("cast_int_to_float", T.CAST, lambda i: ng.cast(i, "float32"), lambda i: i.astype(np.float32),
         [arg(C, N, low=-5, high=5, dtype="int64")]),
    # -- element-wise binary (operands aligned by name, broadcast, permuted) -------------------
    case("add_broadcast", T.ADD, lambda a, b: a + b, lambda a, b: a + b[:, None], [CN, arg(C)],
         torch=lambda a, b: a + b[:, None]),
    case("add_scalar", T.ADD, lambda a: 2.5 + a, lambda a: a + 2.5, [CN], torch=lambda a: a + 2.5),
    case("sub_permuted", T.SUB, lambda a, b: a - b, lambda a, b: a - b.T, [arg(N, C), CN],
         torch=lambda a, b: a - b.T),
    case("sub_scalar_left", T.SUB, lambda a: 1.0 - a, lambda a: 1.0 - a, [CN], torch=lambda a: 1.0 - a),
    case("mul_permuted", T.MUL, lambda a, b: a * b, lambda a, b: a * b.T, [arg(N, C), CN],
         torch=lambda a, b: a * b.T),
    case("mul_same_input", T.MUL, lambda a: a * a, np.square, [CN], torch=lambda a: a * a),
    case("div_broadcast", T.DIV, lambda a, b: a / b, lambda a, b: a / b[None, :], [CN, arg(N, avoid=0.3)],
         torch=lambda a, b: a / b[None, :]),
    case("div_scalar_left", T.DIV, lambda a: 2.0 / a, lambda a: 2.0 / a, [arg(C, N, avoid=0.3)],
         torch=lambda a: 2.0 / a),
    case("pow_broadcast", T.POW, lambda a, b: a ** b, lambda a, b: a ** b[None, :], [POS, arg(N)],
         torch=lambda a, b: a ** b[None, :]),
    case("pow_scalar_exponent", T.POW, lambda a: a ** 3.0, lambda a: a ** 3, [CN], torch=lambda a: a ** 3.0),
    case("maximum_permuted", T.MAXIMUM, ng.maximum, lambda a, b: np.maximum(a, b.T), [CN, arg(N, C)],
         torch=lambda a, b: torch.maximum(a, b.T)),
    case("maximum_ties_go_to_a", T.MAXIMUM, ng.maximum, lambda a, b: np.maximum(a, b[None, :]),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)],
         expected_grads=lambda xs, r: [r * (xs[0] >= xs[1]), (r * (xs[0] < xs[1])).sum(0)]),
    case("minimum_ties_go_to_a", T.MINIMUM, ng.minimum, lambda a, b: np.minimum(a, b[None, :]),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)],
         expected_grads=lambda xs, r: [r * (xs[0] <= xs[1]), (r * (xs[0] > xs[1])).sum(0)]),
    case("div_int_floors", T.DIV, lambda a, b: a / b, lambda a, b: np.floor_divide(a, b),
         [arg(C, N, low=-9, high=9, dtype="int64"), arg(N, values=np.array([2, -3, 4, 5]), dtype="int64")],
         dtype="int64"),
    case("add_int", T.ADD, lambda a, b: a + b, lambda a, b: a + b, [arg(C, N, low=-9, high=9, dtype="int64")] * 2,
         dtype="int64"),
    case("add_int_float_promotes", T.ADD, lambda a, b: a + b, lambda a, b: a + b,
         [arg(C, N, low=-9, high=9, dtype="int64"), CN], torch=lambda a, b: a + b),
    case("where_leaky_relu", T.WHERE, lambda x: ng.where(x > 0.0, x, 0.1 * x),
         lambda x: np.where(x > 0, x, 0.1 * x), [arg(C, N, avoid=0.05)],
         torch=lambda x: torch.where(x > 0, x, 0.1 * x)),
    case("minimum_broadcast", T.MINIMUM, ng.minimum, lambda a, b: np.minimum(a, b[:, None]), [CN, arg(C)],
         torch=lambda a, b: torch.minimum(a, b[:, None])),
    # -- comparisons: forward only, 0/1 in the operands' float dtype ----------------------------
    case("equal", T.EQUAL, ng.equal, lambda a, b: (a == b[None, :]).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)], grad=False),
    case("not_equal", T.NOT_EQUAL, ng.not_equal, lambda a, b: (a != b[None, :]).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)], grad=False),
    case("less", T.LESS, lambda a, b: a < b, lambda a, b: (a < b.T).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, C, values=TIES_CN.T[::-1].copy())], grad=False),
    case("less_equal", T.LESS_EQUAL, lambda a, b: a <= b, lambda a, b: (a <= b.T).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, C, values=TIES_CN.T[::-1].copy())], grad=False),
    case("greater", T.GREATER, lambda a, b: a > b, lambda a, b: (a > b[None, :]).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)], grad=False),
    case("greater_equal", T.GREATER_EQUAL, lambda a, b: a >= b, lambda a, b: (a >= b[None, :]).astype(np.float32),
         [arg(C, N, values=TIES_CN), arg(N, values=TIES_N)], grad=False),
    case("compare_int", T.LESS, lambda a, b: a < b, lambda a, b: (a < b).astype(np.int64),
         [arg(C, N, low=0, high=3, dtype="int64"), arg(C, N, low=0, high=3, dtype="int64")], dtype="int64"),
    case("compare_scalar", T.GREATER, lambda a: a > 1.0, lambda a: (a > 1).astype(np.float32),
         [arg(C, N, values=TIES_CN)], grad=False),
    # -- where ---------------------------------------------------------------------------------
    case("where", T.WHERE, ng.where, lambda c, a, b: np.where(c != 0, a, b[None, :]),
         [arg(C, N, values=MASK_CN, diff=False), CN, arg(N)],
         torch=lambda c, a, b: torch.where(c != 0, a, b[None, :].expand(3, 4))),
    # -- reductions (out axes in permuted order) -------------------------------------------------
    case("sum_reduction_axes", T.SUM, lambda x: ng.sum(x, reduction_axes=[N]), lambda x: x.sum(1),
         [arg(C, N, H)], torch=lambda x: x.sum(1)),
    case("sum_out_axes_permuted", T.SUM, lambda x: ng.sum(x, out_axes=[H, C]), lambda x: x.sum(1).T,
         [arg(C, N, H)], torch=lambda x: x.sum(1).T),
    case("sum_all", T.SUM, lambda x: ng.sum(x), lambda x: x.sum(), [arg(C, N, H)], torch=lambda x: x.sum()),
    case("sum_by_name", T.SUM, lambda x: ng.sum(x, reduction_axes="C"), lambda x: x.sum(0), [CN],
         torch=lambda x: x.sum(0)),
    case("max_out_axes_permuted", T.MAX, lambda x: ng.max(x, out_axes=[H, C]), lambda x: x.max(1).T,
         [arg(C, N, H)], torch=lambda x: x.amax(1).T),
    case("max_ties_split_gradient", T.MAX, lambda x: ng.max(x, reduction_axes=[C]), lambda x: x.max(0),
         [arg(C, N, values=MAX_TIES)], expected_grads=max_tie_grads, torch=lambda x: x.amax(0)),
    case("min_reduction_axes", T.MIN, lambda x: ng.min(x, reduction_axes=[C]), lambda x: x.min(0),
         [arg(C, N, H)], torch=lambda x: x.amin(0)),
    case("min_two_axes_permuted", T.MIN, lambda x: ng.min(x, reduction_axes=[C, H]), lambda x: x.min((0, 2)),
         [arg(C, N, H)], torch=lambda x: x.amin((0, 2))),
    case("prod_out_axes", T.PROD, lambda x: ng.prod(x, out_axes=[N]), lambda x: x.prod(0),
         [POS], torch=lambda x: x.prod(0)),
    case("prod_permuted_signed", T.PROD, lambda x: ng.prod(x, out_axes=[H, C]), lambda x: x.prod(1).T,
         [arg(C, N, H, avoid=0.3)], torch=lambda x: x.prod(1).T),
    case("argmax", T.ARGMAX, lambda x: ng.argmax(x, reduction_axes=[C]), lambda x: x.argmax(0), [CN],
         dtype="int64", grad=False),
    case("argmax_out_axes_permuted", T.ARGMAX, lambda x: ng.argmax(x, out_axes=[H, C]),
         lambda x: x.argmax(1).T, [arg(C, N, H)], dtype="int64", grad=False),
    case("argmin_out_axes_permuted", T.ARGMIN, lambda x: ng.argmin(x, out_axes=[H, C]),
         lambda x: x.argmin(1).T, [arg(C, N, H)], dtype="int64", grad=False),
    case("argmin", T.ARGMIN, lambda x: ng.argmin(x, reduction_axes=[N]), lambda x: x.argmin(1), [CN],
         dtype="int64", grad=False),
    # -- movement -------------------------------------------------------------------------------
    case("sum_int", T.SUM, lambda i: ng.sum(i, reduction_axes=[C]), lambda i: i.sum(0),
         [arg(C, N, low=-9, high=9, dtype="int64")], dtype="int64"),
    case("broadcast", T.BROADCAST, lambda x: ng.broadcast(x, [N, C]), lambda x: np.broadcast_to(x, (4, 3)),
         [arg(C)], torch=lambda x: x[None, :].expand(4, 3)),
    case("broadcast_middle", T.BROADCAST, lambda x: ng.broadcast(x, [H, N, C]),
         lambda x: np.broadcast_to(x.T[None], (5, 4, 3)), [CN], torch=lambda x: x.T[None].expand(5, 4, 3)),
    case("axes_with_order", T.BROADCAST, lambda x: ng.axes_with_order(x, [H, C, N]),
         lambda x: x.transpose(2, 0, 1), [arg(C, N, H)], torch=lambda x: x.permute(2, 0, 1)),
    case("cast_axes", T.CAST_AXES, lambda x: ng.cast_axes(x, [C2, N2]) * ng.constant(MAX_TIES, [C2, N2]),
         lambda x: x * MAX_TIES, [CN], torch=lambda x: x * torch.tensor(MAX_TIES)),
    case("flatten", T.RESHAPE, lambda x: ng.flatten(x), lambda x: x.reshape(15, 4), [arg(C, H, N)],
         torch=lambda x: x.reshape(15, 4)),
    case("flatten_permuted_group", T.RESHAPE, lambda x: ng.flatten(x, [C, H]),
         lambda x: x.transpose(0, 2, 1).reshape(15, 4), [arg(C, N, H)],
         torch=lambda x: x.permute(0, 2, 1).reshape(15, 4)),
    case("unflatten", T.RESHAPE, lambda x: ng.unflatten(x, F, [C, H]), lambda x: x.reshape(3, 5, 4),
         [arg(F, N)], torch=lambda x: x.reshape(3, 5, 4)),
    case("expand_dims", T.BROADCAST, lambda x: ng.expand_dims(x, K, 1),
         lambda x: np.broadcast_to(x[:, None, :], (3, 2, 4)), [CN], torch=lambda x: x[:, None, :].expand(3, 2, 4)),
    case("expand_dims_end", T.BROADCAST, lambda x: ng.expand_dims(x, K, -1),
         lambda x: np.broadcast_to(x[:, :, None], (3, 4, 2)), [CN], torch=lambda x: x[:, :, None].expand(3, 4, 2)),
    case("flatten_keeps_batch_first", T.RESHAPE, lambda x: ng.flatten(x), lambda x: x.reshape(4, 15),
         [arg(N, C, H)], torch=lambda x: x.reshape(4, 15)),
    case("unflatten_last_axis", T.RESHAPE, lambda x: ng.unflatten(x, F, [H, C]), lambda x: x.reshape(4, 5, 3),
         [arg(N, F)], torch=lambda x: x.reshape(4, 5, 3)),
    case("tensor_slice_steps", T.SLICE, lambda x: ng.tensor_slice(x, [slice(1, 5, 2), slice(None, None, -1)]),
         lambda x: x[1:5:2, ::-1], [arg(H, W)], torch=lambda x: x[1:5:2].flip(1)),
    case("tensor_slice_int_and_negative_step", T.SLICE, lambda x: ng.tensor_slice(x, [2, slice(4, 0, -2)]),
         lambda x: x[2, 4:0:-2], [arg(H, W)], torch=lambda x: x[2][torch.tensor([4, 2])]),
    case("tensor_slice_negative_to_start", T.SLICE, lambda x: ng.tensor_slice(x, [slice(3, None, -1), -1]),
         lambda x: x[3::-1, -1], [arg(H, W)], torch=lambda x: x[:4, -1].flip(0)),
    case("tensor_slice_negative_indices", T.SLICE, lambda x: ng.tensor_slice(x, [slice(-1, -6, -2), slice(-4, None)]),
         lambda x: x[-1:-6:-2, -4:], [arg(H, W)], torch=lambda x: x[torch.tensor([4, 2, 0]), 2:]),
    case("slice_along_axis", T.SLICE, lambda x: ng.slice_along_axis(x, N, slice(1, 3)), lambda x: x[:, 1:3],
         [CN], torch=lambda x: x[:, 1:3]),
    case("slice_along_axis_int", T.SLICE, lambda x: ng.slice_along_axis(x, C, -1), lambda x: x[-1], [CN],
         torch=lambda x: x[-1]),
    case("pad", T.PAD, lambda x: ng.pad(x, [(1, 2), (0, 1)]), lambda x: np.pad(x, [(1, 2), (0, 1)]), [CN],
         torch=lambda x: F_().pad(x, (0, 1, 1, 2))),
    case("pad_int", T.PAD, lambda x: ng.pad(x, [1, 0]), lambda x: np.pad(x, [(1, 1), (0, 0)]), [CN],
         torch=lambda x: F_().pad(x, (0, 0, 1, 1))),
    case("concat_along_axis", T.CONCAT, lambda a, b: ng.concat_along_axis([a, b], C),
         lambda a, b: np.concatenate([a, b.T], 0), [CN, arg(N, C5)], torch=lambda a, b: torch.cat([a, b.T], 0)),
    case("concat_three", T.CONCAT, lambda a, b, c: ng.concat_along_axis([a, b, c], N),
         lambda a, b, c: np.concatenate([a, b, c], 1), [CN, arg(C, N_2), CN],
         torch=lambda a, b, c: torch.cat([a, b, c], 1)),
    case("stack", T.CONCAT, lambda a, b: ng.stack([a, b], K, 1), lambda a, b: np.stack([a, b], 1), [CN, CN],
         torch=lambda a, b: torch.stack([a, b], 1)),
    case("stack_last", T.CONCAT, lambda a, b, c: ng.stack([a, b, c], ng.make_axis(3, "S"), 2),
         lambda a, b, c: np.stack([a, b, c], 2), [CN, CN, CN], torch=lambda a, b, c: torch.stack([a, b, c], 2)),
    case("one_hot", (T.EQUAL, T.CAST), lambda i: ng.one_hot(i, Y), lambda i: np.eye(5, dtype=np.float32)[i].T,
         [arg(N, values=LABELS, dtype="int64")], grad=False),
    # -- row lookup (embeddings): gather and its adjoint scatter_add; ids out of range read/write nothing
    case("gather_repeated_ids", T.GATHER, lambda w, i: ng.gather(w, i, Y), lambda w, i: np_gather(w, i, 1),
         [arg(C, Y), arg(N, K, values=LOOKUP_IDS, dtype="int64")],
         torch=lambda w, i: F_().embedding(i, w.T).permute(2, 0, 1)),
    case("gather_out_of_range_ids", T.GATHER, lambda w, i: ng.gather(w, i, Y), lambda w, i: np_gather(w, i, 1),
         [arg(C, Y), arg(N, K, values=LOOKUP_IDS_OUT, dtype="int32")]),
    case("gather_table_axis_first", T.GATHER, lambda w, i: ng.gather(w, i, "Y"), lambda w, i: np_gather(w, i, 0),
         [arg(Y, C, H), arg(N, values=LABELS, dtype="int64")],
         torch=lambda w, i: F_().embedding(i, w.reshape(5, -1)).reshape(4, 3, 5).permute(1, 2, 0)),
    case("scatter_add_repeated_ids", T.SCATTER_ADD, lambda u, i: ng.scatter_add(u, i, [C, Y], Y),
         lambda u, i: np_scatter_add(u, i, 5), [arg(C, N, K), arg(N, K, values=LOOKUP_IDS, dtype="int64")],
         torch=lambda u, i: torch.zeros((3, 5), dtype=u.dtype).index_add(1, i.reshape(-1), u.reshape(3, -1))),
    case("scatter_add_out_of_range_ids", T.SCATTER_ADD, lambda u, i: ng.scatter_add(u, i, [C, Y], Y),
         lambda u, i: np_scatter_add(u, i, 5), [arg(C, N, K), arg(N, K, values=LOOKUP_IDS_OUT, dtype="int64")]),
    # -- dot in every axis order ---------------------------------------------------------------
    case("dot_cn_hc", T.DOT, ng.dot, lambda a, b: np.einsum("cn,hc->nh", a, b), [CN, arg(H, C)],
         torch=lambda a, b: torch.einsum("cn,hc->nh", a, b)),
    case("dot_nc_ch", T.DOT, ng.dot, lambda a, b: a @ b, [arg(N, C), arg(C, H)], torch=lambda a, b: a @ b),
    case("dot_matrix_vector", T.DOT, ng.dot, lambda a, b: a @ b, [arg(H, C), arg(C)], torch=lambda a, b: a @ b),
    case("dot_vector_matrix", T.DOT, ng.dot, lambda a, b: a @ b, [arg(C), CN], torch=lambda a, b: a @ b),
    case("dot_vector_vector", T.DOT, ng.dot, lambda a, b: a @ b, [arg(C), arg(C)], torch=lambda a, b: a @ b),
    case("dot_outer", T.DOT, ng.dot, np.outer, [arg(C), arg(N)], torch=lambda a, b: torch.outer(a, b)),
    case("dot_three_axes", T.DOT, ng.dot, lambda a, b: np.einsum("chn,hkc->nk", a, b),
         [arg(C, H, N), arg(H, K, C)], torch=lambda a, b: torch.einsum("chn,hkc->nk", a, b)),
    case("dot_same_input", T.DOT, lambda a: ng.dot(a, a), lambda a: (a * a).sum(), [arg(C)],
         torch=lambda a: a @ a),
    case("dot_mixed_dtype", T.DOT, lambda a, b: ng.dot(a, ng.cast(b, "float64")), lambda a, b: a @ b,
         [arg(N, C), arg(C, H)], dtype="float64", torch=lambda a, b: a @ b),
    # a chosen output order (passes/scan_layout): b's leading free axis first is one batched matmul,
    # any other order a GEMM and a transposing copy
    case("dot_order_batched", T.DOT, lambda a, b: make(T.DOT, [a, b], axes=[K, H, N]),
         lambda a, b: np.einsum("hc,ckn->khn", a, b), [arg(H, C), arg(C, K, N)],
         torch=lambda a, b: torch.einsum("hc,ckn->khn", a, b)),
    case("dot_order_batched_two", T.DOT, lambda a, b: make(T.DOT, [a, b], axes=[K, N, H, W]),
         lambda a, b: np.einsum("hc,cknw->knhw", a, b), [arg(H, C), arg(C, K, N, W)],
         torch=lambda a, b: torch.einsum("hc,cknw->knhw", a, b)),
    case("dot_order_reversed", T.DOT, lambda a, b: make(T.DOT, [a, b], axes=[N, K, H]),
         lambda a, b: np.einsum("hc,ckn->nkh", a, b), [arg(H, C), arg(C, K, N)],
         torch=lambda a, b: torch.einsum("hc,ckn->nkh", a, b)),
    # -- batch_dot: attention's per-head, per-example products ------------------------------------
    case("batch_dot_qk", T.BATCH_DOT, lambda q, k: ng.batch_dot(q, k, [K, N]),
         lambda q, k: np.einsum("ckhn,ckwn->knhw", q, k), [arg(C, K, H, N), arg(C, K, W, N)],
         torch=lambda q, k: torch.einsum("ckhn,ckwn->knhw", q, k)),
    case("batch_dot_weights_v", T.BATCH_DOT, lambda w, v: ng.batch_dot(w, v, [N, K]),
         lambda w, v: np.einsum("khwn,ckwn->nkhc", w, v), [arg(K, H, W, N), arg(C, K, W, N)],
         torch=lambda w, v: torch.einsum("khwn,ckwn->nkhc", w, v)),
    case("batch_dot_chosen_order", T.BATCH_DOT, lambda a, b: make(T.BATCH_DOT, [a, b], axes=[W, N, H]),
         lambda a, b: np.einsum("chn,cwn->wnh", a, b), [arg(C, H, N), arg(C, W, N)],
         torch=lambda a, b: torch.einsum("chn,cwn->wnh", a, b)),
    case("batch_dot_no_contraction", T.BATCH_DOT, lambda a, b: ng.batch_dot(a, b, [N]),
         lambda a, b: np.einsum("hn,wn->nhw", a, b), [arg(H, N), arg(W, N)],
         torch=lambda a, b: torch.einsum("hn,wn->nhw", a, b)),
    # -- composites ------------------------------------------------------------------------------
    case("softmax", (T.EXP, T.DIV), ng.softmax, np_softmax, [arg(Y, N)], torch=lambda z: z.softmax(0)),
    case("softmax_huge", (T.EXP, T.DIV), ng.softmax, np_softmax, [arg(Y, N, values=BIG)],
         torch=lambda z: z.softmax(0)),
    case("softmax_two_axes", (T.EXP, T.DIV), ng.softmax,
         lambda z: np_softmax(z.reshape(15, 4)).reshape(5, 3, 4), [arg(Y, C, N)],
         torch=lambda z: z.reshape(15, 4).softmax(0).reshape(5, 3, 4)),
    case("softmax_explicit_axis", (T.EXP, T.DIV), lambda z: ng.softmax(z, normalization_axes=[N]),
         lambda z: np_softmax(z, 1), [arg(Y, N)], torch=lambda z: z.softmax(1)),
    case("log_softmax", T.SUB, ng.log_softmax, lambda z: np.log(np_softmax(z)), [arg(Y, N)],
         torch=lambda z: z.log_softmax(0)),
    case("gelu", T.ERF, ng.gelu, lambda x: 0.5 * x * (1 + np_erf(x / np.sqrt(2))), [arg(C, N, low=-4, high=4)],
         torch=lambda x: F_().gelu(x)),
    case("gelu_tanh", T.TANH, lambda x: ng.gelu(x, approximate="tanh"),
         lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), [arg(C, N, low=-4, high=4)],
         torch=lambda x: F_().gelu(x, approximate="tanh")),
    case("layer_norm", (T.MOMENTS, T.RSQRT), lambda x, g, b: ng.layer_norm(x, [C, H], g, b, eps=1e-3),
         lambda x, g, b: (x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + 1e-3)
         * g[:, None, :] + b[:, None, None], [arg(C, N, H), arg(C, H), arg(C)],
         torch=lambda x, g, b: F_().layer_norm(x.permute(1, 0, 2), (3, 5), g, b.reshape(3, 1).expand(3, 5),
                                               eps=1e-3).permute(1, 0, 2)),
    case("logsumexp", T.LOG, lambda z: ng.logsumexp(z, reduction_axes=[Y]), np_logsumexp, [arg(Y, N)],
         torch=lambda z: z.logsumexp(0)),
    case("logsumexp_out_axes_permuted", T.LOG, lambda z: ng.logsumexp(z, out_axes=[H, C]),
         lambda z: np_logsumexp(z, 1).T, [arg(C, N, H)], torch=lambda z: z.logsumexp(1).T),
    case("logsumexp_huge", T.LOG, lambda z: ng.logsumexp(z, reduction_axes=[Y]), np_logsumexp,
         [arg(Y, N, values=BIG)], torch=lambda z: z.logsumexp(0)),
    case("mean_out_axes_permuted", T.DIV, lambda x: ng.mean(x, out_axes=[H, C]), lambda x: x.mean(1).T,
         [arg(C, N, H)], torch=lambda x: x.mean(1).T),
    case("mean_all", T.DIV, ng.mean, np.mean, [arg(C, N, H)], torch=lambda x: x.mean()),
    case("mean_int", T.CAST, ng.mean, lambda i: i.mean(), [arg(C, N, low=-5, high=5, dtype="int64")], grad=False),
    case("cross_entropy_multi_softmax", T.LOG,
         lambda z, y: ng.cross_entropy_multi(ng.softmax(z), y), lambda z, y: -(y * np.log(np_softmax(z))).sum(),
         [arg(Y, N), arg(Y, N, values=ONE_HOT_YN, diff=False)],
         torch=lambda z, y: F_().cross_entropy(z.T, y.argmax(0), reduction="sum")),
    case("cross_entropy_multi_softmax_huge", T.LOG,
         lambda z, y: ng.cross_entropy_multi(ng.softmax(z), y),
         lambda z, y: -(y * (z - np_logsumexp(z)[None, :])).sum(),
         [arg(Y, N, values=BIG), arg(Y, N, values=ONE_HOT_YN, diff=False)], grad_atol=1e-5,
         torch=lambda z, y: F_().cross_entropy(z.T, y.argmax(0), reduction="sum")),
    case("cross_entropy_multi_out_axes", T.LOG,
         lambda z, y: ng.cross_entropy_multi(ng.softmax(z), y, out_axes=[N]),
         lambda z, y: -(y * np.log(np_softmax(z))).sum(0),
         [arg(Y, N), arg(Y, N, values=ONE_HOT_YN, diff=False)],
         torch=lambda z, y: F_().cross_entropy(z.T, y.argmax(0), reduction="none")),
    case("cross_entropy_multi_probabilities", T.LOG, lambda p, y: ng.cross_entropy_multi(p, y),
         lambda p, y: -(y * np.log(p)).sum(), [arg(Y, N, low=0.05, high=1.0), arg(Y, N, low=0.0, high=1.0)],
         torch=lambda p, y: -(y * p.log()).sum()),
    case("cross_entropy_binary_sigmoid", T.LOG1P,
         lambda z, y: ng.cross_entropy_binary(ng.sigmoid(z), y), lambda z, y: (np_softplus(z) - y * z).sum(),
         [arg(C, N, low=-6, high=6, avoid=0.05), arg(C, N, low=0.0, high=1.0)],
         torch=lambda z, y: F_().binary_cross_entropy_with_logits(z, y, reduction="sum")),
    case("cross_entropy_binary_sigmoid_huge", T.LOG1P,
         lambda z, y: ng.cross_entropy_binary(ng.sigmoid(z), y), lambda z, y: (np_softplus(z) - y * z).sum(),
         [arg(Y, N, values=BIG), arg(Y, N, low=0.0, high=1.0)], grad_atol=1e-5,
         torch=lambda z, y: F_().binary_cross_entropy_with_logits(z, y, reduction="sum")),
    case("cross_entropy_binary_probabilities", T.LOG,
         lambda p, y: ng.cross_entropy_binary(p, y, out_axes=[N]),
         lambda p, y: -(y * np.log(p) + (1 - y) * np.log(1 - p)).sum(0),
         [arg(C, N, low=0.05, high=0.95), arg(C, N, low=0.0, high=1.0)],
         torch=lambda p, y: F_().binary_cross_entropy(p, y, reduction="none").sum(0)),
    case("softplus", T.LOG1P, ng.softplus, np_softplus, [arg(C, N, low=-5, high=5, avoid=0.05)],
         torch=lambda x: F_().softplus(x)),
    # -- neural network: [C, H, W, N] images; the full sweep is tests/ngraph_core/test_nn_ops.py ---------
    case("conv_stride_pad_dilation", T.CONV,
         lambda x, w: ng.convolution(x, w, strides=(2, 1), padding=((1, 0), 1), dilation=(1, 2)),
         lambda x, w: nn_ref.conv(x, w, (2, 1), ((1, 0), (1, 1)), (1, 2)), [IMAGE, arg(C, R3, S2, K)],
         torch=lambda x, w: chwn(F_().conv2d(F_().pad(nchw(x), (1, 1, 1, 0)), nchw(w), stride=(2, 1),
                                             dilation=(1, 2)))),
    case("conv_depthwise_same", T.CONV, lambda x, w: ng.convolution(x, w, padding="same", groups=3),
         lambda x, w: nn_ref.conv(x, w, (1, 1), ((1, 1), (0, 1)), (1, 1), groups=3), [IMAGE, arg(CI1, R3, S2, K6)],
         torch=lambda x, w: chwn(F_().conv2d(nchw(x), nchw(w), padding="same", groups=3))),
    case("conv_nchw_input", T.CONV, lambda x, w: ng.convolution(x, w, padding=1),
         lambda x, w: nn_ref.conv(x.transpose(1, 2, 3, 0), w, (1, 1), ((1, 1), (1, 1)), (1, 1)),
         [arg(N_2, C, H, W), arg(C, R3, S2, K)], torch=lambda x, w: chwn(F_().conv2d(x, nchw(w), padding=1))),
    case("deconvolution", T.CONV_BPROP_DATA,
         lambda x, w: ng.deconvolution(x, w, strides=2, padding=(1, 0), output_padding=(1, 0)),
         lambda x, w: nn_ref.deconv(x, w, (2, 2), ((1, 1), (0, 0)), (1, 0), (1, 1)), [IMAGE, arg(K, R3, S2, C)],
         torch=lambda x, w: chwn(F_().conv_transpose2d(nchw(x), nchw(w), stride=2, padding=(1, 0),
                                                       output_padding=(1, 0)))),
    case("conv_filter_gradient", T.CONV_BPROP_FILTER, filter_gradient,
         lambda x, dy: nn_ref.conv_filter_grad(x, dy, (3, 2), (2, 1), ((1, 1), (1, 1)), (1, 1)),
         [IMAGE, arg(K, ng.make_axis(3, "H"), ng.make_axis(7, "W"), N_2)], torch=torch_filter_gradient),
    case("max_pool_ceil_pad", T.POOL, lambda x: ng.pooling(x, 3, strides=2, padding=1, ceil_mode=True),
         lambda x: nn_ref.pool(x, "max", (3, 3), (2, 2), (1, 1), ceil_mode=True), [IMAGE],
         torch=lambda x: chwn(F_().max_pool2d(nchw(x), 3, 2, 1, ceil_mode=True))),
    case("avg_pool_exclude_pad", T.POOL,
         lambda x: ng.pooling(x, (3, 2), op="avg", strides=(2, 1), padding=(1, 0), count_include_pad=False),
         lambda x: nn_ref.pool(x, "avg", (3, 2), (2, 1), (1, 0), count_include_pad=False), [IMAGE],
         torch=lambda x: chwn(F_().avg_pool2d(nchw(x), (3, 2), (2, 1), (1, 0), count_include_pad=False))),
    case("avg_pool_gradient", T.POOL_BPROP,
         lambda dy: pool_gradient(None, dy, fshape=3, op="avg", strides=2, padding=1, ceil_mode=True),
         lambda dy: nn_ref.pool_grad(np.zeros((3, 5, 6, 2)), dy, "avg", (3, 3), (2, 2), (1, 1), ceil_mode=True),
         [arg(C, ng.make_axis(3, "H"), ng.make_axis(4, "W"), N_2)],
         torch=lambda dy: torch_pool_gradient(None, dy, F_().avg_pool2d, kernel_size=3, stride=2, padding=1,
                                              ceil_mode=True)),
    case("max_pool_gradient_ties", T.POOL_BPROP,
         lambda x, dy: pool_gradient(x, dy, fshape=3, strides=(1, 2), padding=1),
         lambda x, dy: nn_ref.pool_grad(x, dy, "max", (3, 3), (1, 2), (1, 1)),
         [arg(C, H, W, N_2, values=POOL_TIES), arg(C, H, ng.make_axis(3, "W"), N_2)], grad=False,
         torch=lambda x, dy: torch_pool_gradient(x, dy, F_().max_pool2d, kernel_size=3, stride=(1, 2),
                                                 padding=1)),
    # -- normalization: statistics per kept axis over the others; batch_norm in both forms ---------
    case("moments_mean", T.MOMENTS, lambda x: ng.moments(x, [C])[0], lambda x: x.mean(axis=(1, 2, 3)), [IMAGE],
         torch=lambda x: x.mean(dim=(1, 2, 3))),
    case("moments_variance", T.MOMENTS, lambda x: ng.moments(x, [C])[1], lambda x: x.var(axis=(1, 2, 3)),
         [arg(C, H, W, N_2, low=3.0, high=5.0)], torch=lambda x: x.var(dim=(1, 2, 3), unbiased=False)),
    case("moments_feature_axis_last", T.MOMENTS, lambda x: ng.moments(x, [C])[1], lambda x: x.var(axis=0),
         [arg(N, C)], torch=lambda x: x.var(dim=0, unbiased=False)),
    case("centered_sums", T.CENTERED_SUMS, lambda dy, x, m: ng.centered_sums(dy, x, m)[1],
         lambda dy, x, m: (dy * (x - m[:, None, None, None])).sum(axis=(1, 2, 3)),
         [IMAGE, IMAGE, arg(C)], torch=lambda dy, x, m: (dy * (x - m[:, None, None, None])).sum(dim=(1, 2, 3))),
    case("centered_sums_gradient_in_another_order", T.CENTERED_SUMS, lambda dy, x, m: ng.centered_sums(dy, x, m)[1],
         lambda dy, x, m: (dy.transpose(2, 3, 1, 0) * (x - m[:, None, None, None])).sum(axis=(1, 2, 3)),
         [arg(N_2, W, C, H), IMAGE, arg(C)],
         torch=lambda dy, x, m: (dy.permute(2, 3, 1, 0) * (x - m[:, None, None, None])).sum(dim=(1, 2, 3))),
    case("moments_two_kept_axes_reordered", T.MOMENTS, lambda x: ng.moments(x, [H, C])[1],
         lambda x: x.var(axis=(2, 3)).T, [IMAGE], torch=lambda x: x.var(dim=(2, 3), unbiased=False).T),
    case("centered_sums_of_gradient", T.CENTERED_SUMS, lambda dy, x, m: ng.centered_sums(dy, x, m)[0],
         lambda dy, x, m: dy.sum(axis=1), [CN, CN, arg(C)], torch=lambda dy, x, m: dy.sum(dim=1)),
    case("batch_norm_training", (T.MOMENTS, T.CUSTOM_GRADIENT),
         lambda x, g, b: ng.batch_norm(x, g, b, eps=1e-3),
         lambda x, g, b: nn_ref.batch_norm(x, g, b, 1e-3, axis=0),
         [arg(C, H, W, N_2, low=-1.0, high=4.0), arg(C), arg(C)],
         torch=lambda x, g, b: chwn(F_().batch_norm(nchw(x), None, None, g, b, training=True, eps=1e-3))),
    case("batch_norm_training_features_last", (T.MOMENTS, T.CUSTOM_GRADIENT),
         lambda x, g, b: ng.relu(ng.batch_norm(x, g, b)), lambda x, g, b: np.maximum(
             nn_ref.batch_norm(x, g, b, 1e-5, axis=1), 0), [arg(N, C, avoid=0.05), arg(C), arg(C)],
         torch=lambda x, g, b: F_().relu(F_().batch_norm(x, None, None, g, b, training=True))),
    case("batch_norm_inference", T.RSQRT,
         lambda x, g, b, m, v: ng.batch_norm(x, g, b, eps=1e-3, mean=m, var=v),
         lambda x, g, b, m, v: (x - m[:, None, None, None]) / np.sqrt(v[:, None, None, None] + 1e-3)
         * g[:, None, None, None] + b[:, None, None, None],
         [IMAGE, arg(C), arg(C), arg(C), arg(C, positive=True)],
         torch=lambda x, g, b, m, v: (x - m[:, None, None, None]) * (v[:, None, None, None] + 1e-3).rsqrt()
         * g[:, None, None, None] + b[:, None, None, None]),  # F.batch_norm: no gradient to running stats
    # -- CTC: loss vs enumerating every path; its gradient op alone (no second derivative) ------
    case("ctc_loss", T.CTC, ng.ctc_loss, lambda x, y, il, ll: ctc_ref.ctc_batch(x, y, il, ll)[0], CTC_INPUTS,
         torch=torch_ctc),
    case("ctc_loss_blank_3_classes_last", T.CTC, lambda x, y, il, ll: ng.ctc_loss(x, y, il, ll, blank=3),
         lambda x, y, il, ll: ctc_ref.ctc_batch(x.transpose(2, 1, 0), y.T, il, ll, blank=3)[0], CTC_BLANK_3,
         torch=lambda x, y, il, ll: torch_ctc(x, y, il, ll, blank=3, classes_last=True)),
    case("ctc_gradient", T.CTC_GRAD, ng.ctc_grad, lambda x, y, il, ll: ctc_ref.ctc_batch(x, y, il, ll)[1],
         CTC_INPUTS, grad=False, torch=torch_ctc_gradient),
    # -- control -------------------------------------------------------------------------------
    case("custom_gradient", T.CUSTOM_GRADIENT, triple_grad, lambda x: x, [CN],
         expected_grads=lambda xs, r: [3.0 * r]),
    case("custom_gradient_in_chain", T.CUSTOM_GRADIENT, lambda x: ng.exp(triple_grad(x * 2.0)),
         lambda x: np.exp(2 * x), [CN], expected_grads=lambda xs, r: [r * np.exp(2 * xs[0]) * 3.0 * 2.0]),
    case("custom_gradient_two_inputs", T.CUSTOM_GRADIENT, lambda a, b: two_input_grad(a, b),
         lambda a, b: a * b[:, None], [CN, arg(C)], expected_grads=lambda xs, r: [2.0 * r, 5.0 * r.sum(1)]),
    case("scan_leaky_rnn", (T.SCAN, T.SCAN_RESULT), scan_ref.ng_leaky, scan_ref.np_leaky,
         [arg(C, ng.make_axis(4, "REC"), N), CN], torch=scan_ref.torch_leaky),
    case("call_subgraph", T.CALL, lambda x: ng.call(SUBGRAPH, x * 2.0), lambda x: np.tanh(2.0 * x) * x * 2.0,
         [CN], torch=lambda x: (2.0 * x).tanh() * x * 2.0),
    case("sequential_value", T.SEQUENTIAL, lambda a, b: ng.sequential([a * 2.0, b + 1.0]), lambda a, b: b + 1,
         [CN, arg(N)], torch=lambda a, b: b + 1),
    # -- collectives on a world of one rank (the identity); tests/ngraph_core/distributed runs them under MPI
    case("allreduce_mean", T.ALLREDUCE, lambda x: ng.distributed.allreduce(ng.tanh(x)), np.tanh, [CN],
         torch=lambda x: x.tanh()),
    case("allreduce_sum_two_buckets", T.ALLREDUCE, lambda a, b: ng.distributed.allreduce(a * 2.0, "sum", bucket_bytes=0)
         + ng.distributed.allreduce(b, "sum", bucket_bytes=0), lambda a, b: 2.0 * a + b, [CN, arg(N)],
         torch=lambda a, b: 2.0 * a + b),
    case("broadcast_from_root_0", T.BROADCAST_FROM, lambda x: ng.distributed.broadcast(x * 3.0), lambda x: 3.0 * x,
         [CN], grad=False),
]
CASES += extra_cases(case)  # the ONNX-set element-wise and indexing ops (extra_op_cases.py)


def _params(cases: list[Case], torch_side: bool = False) -> list[Any]:
    out = []
    for c in cases:
        reason = c.xfail_torch if torch_side else c.xfail
        marks = [pytest.mark.xfail(reason=reason, raises=BUG_RAISES.get(reason), strict=True)] if reason else []
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


@pytest.mark.parametrize("c", _params(CASES))
def test_op(c: Case) -> None:
    check_op(c.build, c.ref, c.inputs, covers=c.covers, **c.kw)


TORCH_CASES = [c for c in CASES if c.torch_fn is not None]


@pytest.mark.parametrize("c", _params(TORCH_CASES, torch_side=True))
def test_op_vs_torch(c: Case) -> None:
    check_op_torch(c.build, c.torch_fn, c.inputs, grad=c.kw.get("grad", True))


def _ends_in_fusible_op(c: Case) -> bool:
    """The case's op is element-wise over floats, so the fusion pass can absorb it into a program."""
    if c.kw.get("dtype", "float32") != "float32":
        return False
    out = c.build(*[ng.placeholder(s.axes, dtype=s.dtype) for s in c.inputs])
    return out.op in OpGroup.ELEMENTWISE - {T.STOP_GRADIENT, T.CAST} and all(s.dtype == out.dtype for s in out.src)


FUSED_CASES = [c for c in CASES if _ends_in_fusible_op(c)]


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in FUSED_CASES])
def test_op_fused(c: Case) -> None:
    """Every element-wise case again, as a step of a ``fused`` program (the fusion pass and its kernel)."""
    check_fused(c.build, c.ref, c.inputs)


def test_op_fused_attention() -> None:
    """``fused_attention`` (made only by ``passes/attention.py``) against the composite it replaces, float64.
    The kernel's and the pass's own tests: ``transformers/test_fused_attention.py`` and
    ``passes/test_fuse_attention.py``."""
    from ngraph_core.passes.attention import fuse_attention

    D, H, R, N = (ng.make_axis(n, name) for n, name in ((4, "D"), (2, "H"), (5, "REC"), (3, "N")))
    q, k, v = (ng.placeholder([D, H, R, N], dtype="float64") for _ in range(3))
    out = ng.scaled_dot_product_attention(q, k, v, causal=True)
    (fused,) = fuse_attention([out], 0, 0)
    assert T.FUSED_ATTENTION in {op.op for op in ng.ir.toposort([fused])}
    values = [np.random.default_rng(i).standard_normal((4, 2, 5, 3)) for i in range(3)]
    with ng.transformers.make_transformer(optimize=False) as t:
        got, expected = t.computation([fused, out], q, k, v)(*values)
    np.testing.assert_allclose(got, expected, atol=1e-12, rtol=1e-12)


# -- leaves, random tensors and side effects: dedicated tests ---------------------------------------------


def test_variable() -> None:
    """Initial values (number, array, callable), sharing across computations, write/read, distinct identity."""
    init = np.arange(12.0).reshape(3, 4)
    filled = ng.variable([C, N], initial_value=2.5)
    from_array = ng.variable([C, N], initial_value=init)
    from_fn = ng.variable([C], initial_value=lambda axes: np.full(axes.lengths, 7.0))
    twin = ng.variable([C, N], initial_value=init)
    assert twin is not from_array and twin.op is T.VARIABLE
    with ng.transformers.make_transformer() as t:
        f = t.computation([filled, from_array, from_fn])
        a, b, c = f()
        assert a.dtype == np.float32 and np.all(a == 2.5)
        np.testing.assert_array_equal(b, init)
        np.testing.assert_array_equal(c, [7.0, 7.0, 7.0])
        double = t.computation(from_array * 2.0)
        t.write_variable(from_array, init + 1)
        np.testing.assert_array_equal(double(), (init + 1) * 2)  # both computations see the new value
        np.testing.assert_array_equal(f()[1], init + 1)
        np.testing.assert_array_equal(t.read_variable(from_array), init + 1)
        b[...] = -1  # a returned array is a copy, not the variable's storage
        np.testing.assert_array_equal(t.read_variable(from_array), init + 1)
    with pytest.raises(ng.AxesError):
        ng.variable([C, N], initial_value=np.zeros((4, 3)))


def test_placeholder() -> None:
    """Fed positionally in the placeholders' axes order; wrong shapes raise FeedError."""
    x, i = ng.placeholder([C, N]), ng.placeholder([N], dtype="int64")
    with ng.transformers.make_transformer() as t:
        f = t.computation([x * 2.0, i + 1], x, i)
        a, b = f(np.ones((3, 4)), np.arange(4))
        np.testing.assert_array_equal(a, np.full((3, 4), 2.0))
        assert b.dtype == np.int64
        np.testing.assert_array_equal(b, [1, 2, 3, 4])
        with pytest.raises(ng.FeedError):
            f(np.ones((4, 3)), np.arange(4))
        with pytest.raises(ng.FeedError):
            f(np.ones((3, 4)))
        with pytest.raises(ng.NgraphError):
            t.computation(x * 2.0)  # x is needed but not listed


@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_random_statistics(kind: str) -> None:
    """Mean and std over a large tensor, dtype, and the support of the uniform."""
    A, B = ng.make_axis(200, "A"), ng.make_axis(250, "B")
    if kind == "uniform":
        r, mean, std = ng.uniform([A, B], low=-1.0, high=3.0, seed=11), 1.0, 4.0 / np.sqrt(12.0)
    else:
        r, mean, std = ng.normal([A, B], mean=0.5, std=2.0, seed=11), 0.5, 2.0
    assert r.op is (T.UNIFORM if kind == "uniform" else T.NORMAL)
    with ng.transformers.make_transformer() as t:
        v = t.computation(r)()
    assert v.dtype == np.float32 and v.shape == (200, 250)
    # the standard error of the mean is std / sqrt(50000) < 0.01; allow ~5 of them
    assert abs(v.mean() - mean) < 5 * std / np.sqrt(v.size)
    assert abs(v.std() - std) < 0.03 * std
    if kind == "uniform":
        assert v.min() >= -1.0 and v.max() < 3.0
        assert np.histogram(v, bins=4, range=(-1, 3))[0].min() > 0.23 * v.size
    else:
        assert abs(np.mean(np.abs(v - mean) < std) - 0.6827) < 0.01


@pytest.mark.parametrize("make", [ng.uniform, ng.normal], ids=["uniform", "normal"])
def test_random_seeds(make: Callable) -> None:
    """Same seed -> same values on two transformers; fresh values on every call; seeds differ -> values differ."""
    r = make([C, N], seed=3)
    other = make([C, N], seed=4)
    unseeded = make([C, N])
    with ng.transformers.make_transformer() as t1, ng.transformers.make_transformer() as t2:
        f1, f2 = t1.computation([r, other, unseeded]), t2.computation([r, other, unseeded])
        first, second = f1(), f1()
        again = f2()
    np.testing.assert_array_equal(first[0], again[0])  # op seed
    np.testing.assert_array_equal(first[2], again[2])  # same transformer seed
    assert not np.array_equal(first[0], first[1])  # another seed
    assert not np.array_equal(first[0], second[0]) and not np.array_equal(first[2], second[2])  # fresh per call
    with ng.transformers.make_transformer(seed=99) as t3:
        assert not np.array_equal(t3.computation(unseeded)()[0], first[2][0])


@pytest.mark.parametrize("make", [ng.uniform, ng.normal], ids=["uniform", "normal"])
def test_random_drawn_once_per_call(make: Callable) -> None:
    """One execution draws a random op once: d sum(x * r) / dx == r in the same call; no gradient to r."""
    r = make([C, N], seed=5)
    x = ng.variable([C, N], initial_value=1.0)
    (g,) = ng.gradients(ng.sum(x * r), [x])
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        value, grad = t.computation([r, g])()
    assert value.dtype == np.float64
    np.testing.assert_array_equal(grad, value)


def test_assign() -> None:
    """assign writes in place, has the new value, persists across calls; a scalar fills."""
    v = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0]))
    with ng.transformers.make_transformer() as t:
        step = t.computation(ng.assign(v, v + 1.0))
        np.testing.assert_array_equal(step(), [2.0, 3.0, 4.0])
        np.testing.assert_array_equal(step(), [3.0, 4.0, 5.0])
        np.testing.assert_array_equal(t.read_variable(v), [3.0, 4.0, 5.0])
        t.computation(ng.assign(v, 0.5))()
        np.testing.assert_array_equal(t.read_variable(v), [0.5, 0.5, 0.5])
    with pytest.raises(ng.DTypeError):
        ng.assign(v + 1.0, v)


def test_assign_permuted_value() -> None:
    """The value is aligned to the variable's axes by name."""
    v = ng.variable([C, N], initial_value=0.0)
    x = ng.placeholder([N, C])
    data = np.arange(12.0).reshape(4, 3)
    with ng.transformers.make_transformer() as t:
        t.computation(ng.assign(v, x), x)(data)
        np.testing.assert_array_equal(t.read_variable(v), data.T)


def test_sequential() -> None:
    """sequential runs in order and has the last value, which sees the assignment before it."""
    v = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0]))
    with ng.transformers.make_transformer() as t:
        f = t.computation(ng.sequential([ng.assign(v, v + 1.0), v * 2.0]))
        np.testing.assert_array_equal(f(), [4.0, 6.0, 8.0])
        np.testing.assert_array_equal(f(), [6.0, 8.0, 10.0])
        np.testing.assert_array_equal(t.read_variable(v), [3.0, 4.0, 5.0])


def test_doall() -> None:
    """doall performs every assignment, returns None, and gradients read the weights from before the update."""
    w = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0]))
    count = ng.variable([], initial_value=0.0)
    loss = ng.sum(w * w)
    (g,) = ng.gradients(loss, [w])
    update = ng.doall([ng.assign(w, w - 0.1 * g), ng.assign(count, count + 1.0)])
    with ng.transformers.make_transformer() as t:
        f = t.computation([loss, update])
        loss_value, nothing = f()
        assert nothing is None
        assert float(loss_value) == pytest.approx(14.0)
        np.testing.assert_allclose(t.read_variable(w), [0.8, 1.6, 2.4], rtol=1e-6)
        assert float(t.read_variable(count)) == 1.0
        assert t.computation(update)() is None
        np.testing.assert_allclose(t.read_variable(w), [0.64, 1.28, 1.92], rtol=1e-6)
        assert float(t.read_variable(count)) == 2.0


def test_doall_reads_before_writes() -> None:
    """Every read in a doall sees the values from before its assignments (a swap, coupled SGD steps)."""
    a, b = ng.variable([C], initial_value=1.0), ng.variable([C], initial_value=5.0)
    w = ng.variable([C], initial_value=np.array([1.0, 2.0, 3.0]))
    x = ng.variable([C], initial_value=np.array([10.0, 20.0, 30.0]))
    gw, gx = ng.gradients(ng.sum(w * x), [w, x])  # gw = x, gx = w
    with ng.transformers.make_transformer() as t:
        t.computation(ng.doall([ng.assign(a, b), ng.assign(b, a)]))()
        np.testing.assert_array_equal(t.read_variable(a), [5.0] * 3)
        np.testing.assert_array_equal(t.read_variable(b), [1.0] * 3)
        t.computation(ng.doall([ng.assign(w, w - 0.1 * gw), ng.assign(x, x - 0.1 * gx)]))()
        np.testing.assert_allclose(t.read_variable(w), [0.0, 0.0, 0.0], atol=1e-6)
        np.testing.assert_allclose(t.read_variable(x), [9.9, 19.8, 29.7], rtol=1e-6)


def test_assign_overlapping_view() -> None:
    """assign(v, a transposed view of v) writes the transpose (the value may alias the target)."""
    A, B = ng.make_axis(3, "A"), ng.make_axis(3, "B")
    v = ng.variable([A, B], initial_value=np.arange(9.0).reshape(3, 3))
    with ng.transformers.make_transformer() as t:
        out = t.computation(ng.assign(v, ng.cast_axes(ng.axes_with_order(v, [B, A]), [A, B])))()
        np.testing.assert_array_equal(out, np.arange(9.0).reshape(3, 3).T)
        np.testing.assert_array_equal(t.read_variable(v), np.arange(9.0).reshape(3, 3).T)


def test_allreduce_buckets_in_plan() -> None:
    """The bucket_allreduce pass turns allreduces into one allreduce_start/allreduce_wait pair per bucket."""
    x, y = ng.placeholder([C, N]), ng.placeholder([N])
    outs = [ng.distributed.allreduce(x * 2.0, "sum"), ng.distributed.allreduce(y, "sum")]  # one 64-byte bucket
    with ng.transformers.make_transformer() as t:
        f = t.computation(outs, x, y)
        kinds = [op.op for op in f.graph.order]
        a, b = f(np.ones((3, 4)), np.arange(4.0))
    assert kinds.count(T.ALLREDUCE_START) == 1 and kinds.count(T.ALLREDUCE_WAIT) == 1 and T.ALLREDUCE not in kinds
    np.testing.assert_array_equal(a, np.full((3, 4), 2.0))
    np.testing.assert_array_equal(b, np.arange(4.0))


# -- the coverage table read by test_tables.py --------------------------------------------------------------

DEDICATED: dict[T, list[str]] = {
    T.VARIABLE: ["test_variable", "test_assign"],
    T.PLACEHOLDER: ["test_placeholder"],
    T.UNIFORM: ["test_random_statistics", "test_random_seeds", "test_random_drawn_once_per_call"],
    T.NORMAL: ["test_random_statistics", "test_random_seeds", "test_random_drawn_once_per_call"],
    T.ASSIGN: ["test_assign", "test_assign_permuted_value", "test_assign_overlapping_view", "test_sequential",
               "test_doall"],
    T.SEQUENTIAL: ["test_sequential"],
    T.DOALL: ["test_doall", "test_doall_reads_before_writes"],
}
if hasattr(T, "ALLREDUCE_START"):  # made only by the bucket_allreduce pass
    DEDICATED[T.ALLREDUCE_START] = ["test_allreduce_buckets_in_plan"]
    DEDICATED[T.ALLREDUCE_WAIT] = ["test_allreduce_buckets_in_plan"]
if hasattr(T, "FUSED"):  # made only by the compiler's fusion pass
    DEDICATED[T.FUSED] = ["test_op_fused"]
if hasattr(T, "FUSED_ATTENTION"):  # made only by the fuse_attention pass
    DEDICATED[T.FUSED_ATTENTION] = ["test_op_fused_attention"]

COVERAGE: dict[T, list[str]] = {}
for _c in CASES:
    for _t in _c.covers:
        COVERAGE.setdefault(_t, []).append(f"test_op[{_c.id}]")
for _t, _names in DEDICATED.items():
    COVERAGE.setdefault(_t, []).extend(_names)
