"""``test_ops.py`` cases for the ONNX-set ops: rounding, erf, trigonometry, mod, tests, logic, bit ops
(``ng.floor`` ... ``ng.bit_shift``) and positional indexing (cumsum, topk, gather/scatter elements / nd).

``extra_cases(case)`` returns them built with ``test_ops.case``, so they run through the same
``check_op`` (forward vs NumPy in float32 and float64, dtype, gradients vs finite differences),
``check_op_torch`` and ``check_fused`` tests, and count in ``test_ops.COVERAGE``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from op_helper import arg

import ngraph_core as ng
from ngraph_core import OpType as T

try:
    import torch
except ImportError:  # torch comparisons skip (importorskip in check_op_torch)
    torch = None

C, N, K = ng.make_axis(3, "C"), ng.make_axis(4, "N"), ng.make_axis(2, "K")
Y, Q = ng.make_axis(5, "Y"), ng.make_axis(2, "Q")
CN = arg(C, N)

_rng = np.random.default_rng(16)
HALVES = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 3.5, -3.5], [0.49, -0.51, 2.0, -0.0]])
SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.0], [-0.0, 1.0, -np.nan, 3e38], [-3e38, np.inf, 1e-30, -np.inf]])
BOOLS_A = np.array([[True, True, False, False], [True, False, True, False], [False, False, True, True]])
BOOLS_B = np.array([True, False, True, False])
# dividends and divisors of both signs (divisors never 0) for mod / fmod
DIVIDENDS = np.array([[-7.0, 7.0, -7.0, 7.0], [5.5, -5.5, 0.0, -0.0], [3.0, -3.0, 6.25, -6.25]])
DIVISORS = np.array([3.0, -3.0, -2.0, 2.5])


def np_erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def np_isinf(positive: bool, negative: bool) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: (positive & (x == np.inf)) | (negative & (x == -np.inf))


def _unary_cases(case: Callable[..., Any]) -> list[Any]:
    def rng_arg(low: float, high: float) -> Any:
        return arg(C, N, low=low, high=high)

    return [
        case("floor", T.FLOOR, ng.floor, np.floor, [arg(C, N, low=-3, high=3)], torch=lambda x: x.floor()),
        case("ceil", T.CEIL, ng.ceil, np.ceil, [arg(C, N, low=-3, high=3)], torch=lambda x: x.ceil()),
        case("round", T.ROUND, ng.round, np.rint, [arg(C, N, low=-3, high=3)], torch=lambda x: x.round()),
        case("round_halves_to_even", T.ROUND, ng.round, lambda x: np.array([[-2, -2, -0, 0], [2, 2, 4, -4],
                                                                            [0, -1, 2, -0.0]]),
             [arg(C, N, values=HALVES)], grad=False, torch=lambda x: x.round()),
        case("floor_ceil_edges", (T.FLOOR, T.CEIL), lambda x: ng.floor(x) + ng.ceil(x) * 10.0,
             lambda x: np.floor(x) + np.ceil(x) * 10, [arg(C, N, values=HALVES)], grad=False),
        case("erf", T.ERF, ng.erf, np_erf, [rng_arg(-3, 3)], torch=lambda x: x.erf()),
        case("erf_tails", T.ERF, ng.erf, np_erf, [arg(C, N, values=HALVES * 2.5)], torch=lambda x: x.erf()),
        case("tan", T.TAN, ng.tan, np.tan, [rng_arg(-1.2, 1.2)], torch=lambda x: x.tan()),
        case("asin", T.ASIN, ng.asin, np.arcsin, [rng_arg(-0.9, 0.9)], torch=lambda x: x.asin()),
        case("acos", T.ACOS, ng.acos, np.arccos, [rng_arg(-0.9, 0.9)], torch=lambda x: x.acos()),
        case("atan", T.ATAN, ng.atan, np.arctan, [rng_arg(-3, 3)], torch=lambda x: x.atan()),
        case("sinh", T.SINH, ng.sinh, np.sinh, [CN], torch=lambda x: x.sinh()),
        case("cosh", T.COSH, ng.cosh, np.cosh, [CN], torch=lambda x: x.cosh()),
        case("asinh", T.ASINH, ng.asinh, np.arcsinh, [rng_arg(-3, 3)], torch=lambda x: x.asinh()),
        case("acosh", T.ACOSH, ng.acosh, np.arccosh, [rng_arg(1.1, 3)], torch=lambda x: x.acosh()),
        case("atanh", T.ATANH, ng.atanh, np.arctanh, [rng_arg(-0.9, 0.9)], torch=lambda x: x.atanh()),
        case("isnan", T.ISNAN, ng.isnan, np.isnan, [arg(C, N, values=SPECIAL)], dtype="bool", grad=False),
        case("isinf", T.ISINF, ng.isinf, np.isinf, [arg(C, N, values=SPECIAL)], dtype="bool", grad=False),
        case("isinf_positive", T.ISINF, lambda x: ng.isinf(x, detect_negative=False), np_isinf(True, False),
             [arg(C, N, values=SPECIAL)], dtype="bool", grad=False),
        case("isinf_negative", T.ISINF, lambda x: ng.isinf(x, detect_positive=False), np_isinf(False, True),
             [arg(C, N, values=SPECIAL)], dtype="bool", grad=False),
        case("isinf_neither", T.ISINF, lambda x: ng.isinf(x, False, False), np_isinf(False, False),
             [arg(C, N, values=SPECIAL)], dtype="bool", grad=False),
        case("logical_not", T.LOGICAL_NOT, ng.logical_not, np.logical_not, [arg(C, N, values=BOOLS_A, dtype="bool")],
             dtype="bool"),
        case("bitwise_not_int64", T.BITWISE_NOT, ng.bitwise_not, np.invert,
             [arg(C, N, low=-99, high=99, dtype="int64")], dtype="int64"),
        case("bitwise_not_uint8", T.BITWISE_NOT, ng.bitwise_not, np.invert,
             [arg(C, N, low=0, high=255, dtype="uint8")], dtype="uint8"),
    ]


def _binary_cases(case: Callable[..., Any]) -> list[Any]:
    ints = arg(C, N, low=-50, high=50, dtype="int64")
    bools = [arg(C, N, values=BOOLS_A, dtype="bool"), arg(N, values=BOOLS_B, dtype="bool")]
    int_divisors = arg(N, values=np.array([3, -3, -2, 5]), dtype="int64")
    return [
        case("mod_float", T.MOD, lambda a, b: ng.mod(a, b), lambda a, b: np.mod(a, b[None, :]),
             [arg(C, N, low=-5, high=5), arg(N, values=DIVISORS)],
             torch=lambda a, b: torch.remainder(a, b[None, :])),
        case("mod_signs", T.MOD, ng.mod, lambda a, b: np.mod(a, b[None, :]),
             [arg(C, N, values=DIVIDENDS), arg(N, values=DIVISORS)], grad=False),
        case("mod_int_python_sign", T.MOD, ng.mod, lambda a, b: np.mod(a, b[None, :]), [ints, int_divisors],
             dtype="int64"),
        case("mod_scalar_divisor", T.MOD, lambda a: ng.mod(a, -1.5), lambda a: np.mod(a, -1.5),
             [arg(C, N, low=-5, high=5)], torch=lambda a: torch.remainder(a, -1.5)),
        case("fmod_float", T.FMOD, lambda a, b: ng.mod(a, b, fmod=True), lambda a, b: np.fmod(a, b[None, :]),
             [arg(C, N, low=-5, high=5), arg(N, values=DIVISORS)], torch=lambda a, b: torch.fmod(a, b[None, :])),
        case("fmod_signs", T.FMOD, lambda a, b: ng.mod(a, b, fmod=True), lambda a, b: np.fmod(a, b[None, :]),
             [arg(C, N, values=DIVIDENDS), arg(N, values=DIVISORS)], grad=False),
        case("fmod_int_dividend_sign", T.FMOD, lambda a, b: ng.mod(a, b, fmod=True),
             lambda a, b: np.fmod(a, b[None, :]), [ints, int_divisors], dtype="int64"),
        case("logical_and", T.LOGICAL_AND, ng.logical_and, lambda a, b: a & b[None, :], bools, dtype="bool"),
        case("logical_or", T.LOGICAL_OR, ng.logical_or, lambda a, b: a | b[None, :], bools, dtype="bool"),
        case("logical_xor", T.LOGICAL_XOR, ng.logical_xor, lambda a, b: a ^ b[None, :], bools, dtype="bool"),
        case("bitwise_and", T.BITWISE_AND, ng.bitwise_and, np.bitwise_and, [ints, ints], dtype="int64"),
        case("bitwise_or_int32_int64", T.BITWISE_OR, ng.bitwise_or, np.bitwise_or,
             [arg(C, N, low=-50, high=50, dtype="int32"), ints], dtype="int64"),
        case("bitwise_xor_uint8", T.BITWISE_XOR, lambda a: ng.bitwise_xor(a, 0b1010_1010),
             lambda a: a ^ np.uint8(0b1010_1010), [arg(C, N, low=0, high=255, dtype="uint8")], dtype="uint8"),
        case("bit_shift_left_uint8", T.BIT_SHIFT, lambda a, b: ng.bit_shift(a, b), lambda a, b: a << b,
             [arg(C, N, low=0, high=31, dtype="uint8"), arg(C, N, low=0, high=4, dtype="uint8")], dtype="uint8"),
        case("bit_shift_right_int64", T.BIT_SHIFT, lambda a, b: ng.bit_shift(a, b, "right"), lambda a, b: a >> b,
             [arg(C, N, low=0, high=1000, dtype="int64"), arg(C, N, low=0, high=9, dtype="int64")], dtype="int64"),
    ]


# -- positional indexing references (NumPy) --------------------------------------------------------------

TIES_YN = _rng.integers(0, 3, (5, 4)).astype(np.float64)
ELEM_IDX = np.array([[2, -1, 0, 1], [-3, 1, 2, 2]])  # [K:2, N:4] into C:3, negatives wrap
ELEM_IDX_OUT = np.array([[2, 3, 0, -4], [1, 1, 7, 2]])  # ... some out of range
ELEM_DUP = np.array([[0, 1, 2, 1], [0, 1, 0, 1]])  # [K, N]: repeated positions along C
ELEM_UNIQUE = np.array([[2, 0, 1, 0], [0, 2, 2, 1]])
ELEM_LAST = np.array([[3, 0], [1, 1], [0, 2]])  # [C, K] into N:4
ND_IDX = np.array([[[2, 1], [0, 3]], [[-1, -1], [1, 0]], [[0, 0], [1, 2]]])  # [Y':3, K:2, Q:2] into [C, N]
ND_DUP = np.array([[[2, 1], [0, 3]], [[2, 1], [1, 0]], [[0, 3], [2, 1]]])
Y3 = ng.make_axis(3, "Z")


def np_exclusive(x: np.ndarray, axis: int, reverse: bool, fn: Callable = np.cumsum, identity: float = 0.0) -> Any:
    v = np.flip(x, axis) if reverse else x
    acc = np.moveaxis(fn(v, axis), axis, 0)
    out = np.concatenate([np.full_like(acc[:1], identity), acc[:-1]], 0)
    out = np.moveaxis(out, 0, axis)
    return np.flip(out, axis) if reverse else out


def np_topk_indices(x: np.ndarray, k: int, axis: int, largest: bool) -> np.ndarray:
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    return np.take(order, range(k), axis=axis)


def np_gather_elements(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    n = x.shape[axis]
    i = np.where(idx < 0, idx + n, idx)
    valid = (i >= 0) & (i < n)
    return np.where(valid, np.take_along_axis(x, np.where(valid, i, 0), axis), 0)


def np_scatter_elements(x: np.ndarray, idx: np.ndarray, upd: np.ndarray, reduction: str) -> np.ndarray:
    """Scatter along axis 0 of 2-D ``x`` (the cases' layout) by an explicit loop."""
    out = x.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for k, j in np.ndindex(idx.shape):
        i = idx[k, j] + (x.shape[0] if idx[k, j] < 0 else 0)
        if 0 <= i < x.shape[0]:
            out[i, j] = combine[reduction](out[i, j], upd[k, j])
    return out


def np_gather_nd(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    out = np.zeros(idx.shape[:-1] + x.shape[idx.shape[-1]:])
    for pos in np.ndindex(idx.shape[:-1]):
        t = tuple(int(v) for v in idx[pos])
        if all(-n <= v < n for v, n in zip(t, x.shape)):
            out[pos] = x[t]
    return out


def np_scatter_nd(x: np.ndarray, idx: np.ndarray, upd: np.ndarray, reduction: str) -> np.ndarray:
    out = x.copy()
    combine = {"none": lambda a, b: b, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for pos in np.ndindex(idx.shape[:-1]):
        t = tuple(int(v) for v in idx[pos])
        out[t] = combine[reduction](out[t], upd[pos])
    return out


def _torch_reduce(name: str) -> str:
    return {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}[name]


def _indexing_cases(case: Callable[..., Any]) -> list[Any]:
    yn = arg(Y, N)
    cases = [
        case("cumsum", T.CUMSUM, lambda x: ng.cumsum(x, Y), lambda x: np.cumsum(x, 0), [yn],
             torch=lambda x: x.cumsum(0)),
        case("cumsum_reverse_by_position", T.CUMSUM, lambda x: ng.cumsum(x, -1, reverse=True),
             lambda x: np.flip(np.cumsum(np.flip(x, 1), 1), 1), [yn], torch=lambda x: x.flip(1).cumsum(1).flip(1)),
        case("cumsum_exclusive", T.CUMSUM, lambda x: ng.cumsum(x, "N", exclusive=True),
             lambda x: np_exclusive(x, 1, False), [yn]),
        case("cumsum_exclusive_reverse", T.CUMSUM, lambda x: ng.cumsum(x, Y, exclusive=True, reverse=True),
             lambda x: np_exclusive(x, 0, True), [yn]),
        case("cumsum_int32", T.CUMSUM, lambda x: ng.cumsum(x, Y), lambda x: np.cumsum(x, 0, dtype=np.int32),
             [arg(Y, N, low=-9, high=9, dtype="int32")], dtype="int32"),
        case("cumprod", T.CUMPROD, lambda x: ng.cumprod(x, Y), lambda x: np.cumprod(x, 0),
             [arg(Y, N, avoid=0.3)], torch=lambda x: x.cumprod(0)),
        case("cumprod_exclusive_reverse", T.CUMPROD, lambda x: ng.cumprod(x, N, exclusive=True, reverse=True),
             lambda x: np_exclusive(x, 1, True, np.cumprod, 1.0), [arg(Y, N, avoid=0.3)]),
        case("topk_values", (T.TOPK, T.GATHER_ELEMENTS), lambda x: ng.topk(x, Y, 3)[0],
             lambda x: -np.sort(-x, 0)[:3], [yn], torch=lambda x: torch.topk(x, 3, 0).values),
        case("topk_indices", T.TOPK, lambda x: ng.topk(x, Y, 3)[1], lambda x: np_topk_indices(x, 3, 0, True),
             [yn], dtype="int64", grad=False, torch=lambda x: torch.topk(x, 3, 0).indices),
        case("topk_smallest_last_axis", T.TOPK, lambda x: ng.topk(x, N, 2, largest=False)[1],
             lambda x: np_topk_indices(x, 2, 1, False), [yn], dtype="int64", grad=False,
             torch=lambda x: torch.topk(x, 2, 1, largest=False).indices),
        case("topk_ties_lower_index_first", T.TOPK, lambda x: ng.topk(x, Y, 4)[1],
             lambda x: np_topk_indices(x, 4, 0, True), [arg(Y, N, values=TIES_YN)], dtype="int64", grad=False),
        case("topk_ties_smallest", T.TOPK, lambda x: ng.topk(x, Y, 5, largest=False)[1],
             lambda x: np_topk_indices(x, 5, 0, False), [arg(Y, N, values=TIES_YN)], dtype="int64", grad=False),
        case("topk_int", T.TOPK, lambda x: ng.topk(x, Y, 2)[0], lambda x: -np.sort(-x, 0)[:2],
             [arg(Y, N, low=-9, high=9, dtype="int64")], dtype="int64"),
        case("gather_elements", T.GATHER_ELEMENTS, lambda x, i: ng.gather_elements(x, i, C),
             lambda x, i: np_gather_elements(x, i, 0), [arg(C, N), arg(K, N, values=ELEM_IDX, dtype="int64")],
             torch=lambda x, i: torch.gather(x, 0, torch.where(i < 0, i + 3, i))),
        case("gather_elements_out_of_range", T.GATHER_ELEMENTS, lambda x, i: ng.gather_elements(x, i, 0),
             lambda x, i: np_gather_elements(x, i, 0), [arg(C, N), arg(K, N, values=ELEM_IDX_OUT, dtype="int32")]),
        case("gather_elements_last_axis", T.GATHER_ELEMENTS, lambda x, i: ng.gather_elements(x, i, N),
             lambda x, i: np_gather_elements(x, i, 1), [arg(C, N), arg(C, K, values=ELEM_LAST, dtype="int64")],
             torch=lambda x, i: torch.gather(x, 1, i)),
        case("gather_nd", T.GATHER_ND, ng.gather_nd, np_gather_nd, [arg(C, N), arg(Y3, K, Q, values=ND_IDX,
                                                                                   dtype="int64")]),
        case("gather_nd_rows", T.GATHER_ND, ng.gather_nd, np_gather_nd,
             [arg(C, N), arg(K, ng.make_axis(1, "Q"), values=np.array([[2], [-3]]), dtype="int64")]),
        case("gather_nd_batch", T.GATHER_ND, lambda x, i: ng.gather_nd(x, i, batch_dims=1),
             lambda x, i: np.stack([np_gather_nd(x[b], i[b]) for b in range(3)]),
             [arg(C, N, Y), arg(C, K, ng.make_axis(1, "Q"), values=np.array([[[3], [0]], [[1], [1]], [[-1], [2]]]),
                                dtype="int64")]),
    ]
    for red in ("none", "add", "mul", "max", "min"):
        idx = ELEM_UNIQUE if red == "none" else ELEM_DUP
        torch_fn = (lambda x, i, u: torch.scatter(x, 0, i, u)) if red == "none" else (
            lambda x, i, u, r=red: torch.scatter_reduce(x, 0, i, u, _torch_reduce(r), include_self=True))
        differentiable = red in ("none", "add")
        cases.append(case(
            f"scatter_elements_{red}", T.SCATTER_ELEMENTS,
            lambda x, i, u, r=red: ng.scatter_elements(x, i, u, C, reduction=r),
            lambda x, i, u, r=red: np_scatter_elements(x, i, u, r),
            [arg(C, N), arg(K, N, values=idx, dtype="int64"), arg(K, N)], grad=differentiable,
            torch=torch_fn))
        nd_idx = ND_IDX if red == "none" else ND_DUP
        cases.append(case(
            f"scatter_nd_{red}", T.SCATTER_ND, lambda x, i, u, r=red: ng.scatter_nd(x, i, u, reduction=r),
            lambda x, i, u, r=red: np_scatter_nd(x, i, u, r),
            [arg(C, N), arg(Y3, K, Q, values=nd_idx, dtype="int64"), arg(Y3, K)], grad=differentiable))
    return cases


def extra_cases(case: Callable[..., Any]) -> list[Any]:
    """The cases, built with ``test_ops.case`` (passed in: this module is imported by test_ops)."""
    return _unary_cases(case) + _binary_cases(case) + _indexing_cases(case)


# -- one graph per OpType for test_serialize.py's round trips (placeholders are fed floats in [0.5, 2)) --------

Graph = Callable[[], tuple[list[ng.Op], list[ng.Op]]]
N2 = ng.make_axis(2, "N")


def _unary(fn: Callable[[ng.Op], ng.Op]) -> Graph:
    return lambda: ([fn(x := ng.placeholder([C, N2], name="X"))], [x])


def _binary(fn: Callable[[ng.Op, ng.Op], ng.Op]) -> Graph:
    return lambda: ([fn(x := ng.placeholder([C, N2], name="X"), y := ng.placeholder([N2], name="Y"))], [x, y])


def _ints(x: ng.Op) -> ng.Op:
    return ng.cast(x * 10.0, "int64")


def _flag(x: ng.Op) -> ng.Op:
    return ng.cast(x > 1.0, "bool")


def _nd_ids() -> ng.Op:
    return ng.constant(np.array([[2, 1], [-1, 0], [0, 1]]), [ng.make_axis(3, "T"), Q], dtype="int64")


def serialize_graphs() -> dict[T, Graph]:
    """OpType -> a builder of (results, placeholders) through the public API, for ``test_serialize.GRAPHS``."""
    return {
        T.FLOOR: _unary(lambda x: ng.floor(x * 3.0)), T.CEIL: _unary(lambda x: ng.ceil(x * 3.0)),
        T.ROUND: _unary(lambda x: ng.round(x * 3.0)), T.ERF: _unary(ng.erf), T.TAN: _unary(ng.tan),
        T.ASIN: _unary(lambda x: ng.asin(x * 0.4)), T.ACOS: _unary(lambda x: ng.acos(x * 0.4)),
        T.ATAN: _unary(ng.atan), T.SINH: _unary(ng.sinh), T.COSH: _unary(ng.cosh), T.ASINH: _unary(ng.asinh),
        T.ACOSH: _unary(lambda x: ng.acosh(x + 1.0)), T.ATANH: _unary(lambda x: ng.atanh(x * 0.4)),
        T.ISNAN: _unary(lambda x: ng.isnan(ng.where(x > 1.0, x, math.nan))),
        T.ISINF: _unary(lambda x: ng.isinf(ng.where(x > 1.0, math.inf, -math.inf), detect_positive=False)),
        T.LOGICAL_NOT: _unary(lambda x: ng.logical_not(_flag(x))),
        T.BITWISE_NOT: _unary(lambda x: ng.bitwise_not(_ints(x))),
        T.MOD: _binary(lambda x, y: ng.mod(x * 3.0, -y)), T.FMOD: _binary(lambda x, y: ng.mod(-x * 3.0, y, True)),
        T.LOGICAL_AND: _binary(lambda x, y: ng.logical_and(_flag(x), _flag(y * 1.5))),
        T.LOGICAL_OR: _binary(lambda x, y: ng.logical_or(_flag(x), _flag(y * 1.5))),
        T.LOGICAL_XOR: _binary(lambda x, y: ng.logical_xor(_flag(x), _flag(y * 1.5))),
        T.BITWISE_AND: _binary(lambda x, y: ng.bitwise_and(_ints(x), _ints(y))),
        T.BITWISE_OR: _binary(lambda x, y: ng.bitwise_or(_ints(x), _ints(y))),
        T.BITWISE_XOR: _binary(lambda x, y: ng.bitwise_xor(_ints(x), _ints(y))),
        T.BIT_SHIFT: _binary(lambda x, y: ng.bit_shift(_ints(x), ng.cast(y * 2.0, "int64"), "right")),
        T.CUMSUM: _unary(lambda x: ng.cumsum(x, C, exclusive=True, reverse=True)),
        T.CUMPROD: _unary(lambda x: ng.cumprod(x, N2, reverse=True)),
        T.TOPK: _unary(lambda x: ng.topk(x, C, 2, largest=False)[1]),
        T.GATHER_ELEMENTS: _unary(lambda x: ng.topk(x, C, 2)[0]),
        T.SCATTER_ELEMENTS: _unary(lambda x: ng.scatter_elements(x, ng.topk(x, C, 1)[1], ng.topk(x, C, 1)[0] * 2.0,
                                                                  C, "max")),
        T.GATHER_ND: _unary(lambda x: ng.gather_nd(x, _nd_ids())),
        T.SCATTER_ND: _unary(lambda x: ng.scatter_nd(x, _nd_ids(), ng.gather_nd(x, _nd_ids()) * 2.0, "add")),
    }
