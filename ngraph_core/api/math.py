"""Element-wise math, comparisons, reductions and ``dot``, plus the Python operators on ``Op``.

Element-wise operands are aligned *by axis name*: a scalar, or an operand whose
axes are a subset of the other's, is broadcast (an explicit ``broadcast`` op is
inserted). When each operand has an axis the other lacks the op raises
``AxesError``, because that is an outer product by accident; ask for it with
``ng.broadcast``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

from ..errors import AxesError, DTypeError
from ..ir import Axes, Axis, Op, OpType, format_axes, is_float, make
from .tensors import as_op, constant

AxisSpec = Axis | str | Iterable[Axis | str] | None


def _resolve_axes(x: Op, spec: AxisSpec, what: str) -> Axes:
    """``spec`` (axes, one axis, or names) as Axes drawn from ``x``'s axes."""
    if spec is None:
        return Axes(())
    items = [spec] if isinstance(spec, (Axis, str)) else list(spec)
    out = []
    for item in items:
        found = x.axes.find(item if isinstance(item, str) else item.name)
        if found is None or (isinstance(item, Axis) and found != item):
            raise AxesError(
                f"{what}: axis {item} is not an axis of the input {format_axes(x.axes)}; "
                "hint: pass axes taken from the input's .axes"
            )
        out.append(found)
    return Axes(out)


def broadcast_to(x: Op, axes: Axes) -> Op:
    """``x`` viewed with ``axes`` (a superset of its own, any order); a no-op when equal."""
    return x if x.axes == axes else make(OpType.BROADCAST, [x], axes=axes)


def align(ops: list[Op], what: str) -> list[Op]:
    """Broadcast ``ops`` by axis name to a common axes; raise ``AxesError`` on an accidental outer product."""
    target = builtins.max(ops, key=lambda o: len(o.axes)).axes
    for o in ops:
        try:
            target.check_compatible(o.axes)
        except AxesError as exc:
            raise AxesError(f"{what}: {exc}; hint: axes of one name must have one length") from None
        if not o.axes.is_subset_of(target):
            axes_list = " and ".join(format_axes(p.axes) for p in ops)
            raise AxesError(
                f"{what}: operands have axes {axes_list}; each has an axis the other lacks, so this "
                f"would be an outer product. Expected one operand's axes to contain the other's. "
                f"hint: if you mean the outer product, broadcast one operand explicitly, e.g. "
                f"ng.broadcast(x, [{', '.join((target | o.axes).names)}]), or use ng.dot on operands sharing no axes"
            )
    return [broadcast_to(o, target) for o in ops]


def _operands(args: tuple[Any, ...], what: str) -> list[Op]:
    like = next((a for a in args if isinstance(a, Op)), None)
    return align([as_op(a, like, what) for a in args], what)


def _unary(kind: OpType, x: Any) -> Op:
    x = as_op(x, where=kind.value)
    if not is_float(x.dtype) and kind not in (OpType.NEG, OpType.ABS, OpType.SIGN, OpType.SQUARE,
                                               OpType.STOP_GRADIENT):
        raise DTypeError(
            f"{kind.value}: expected a float input, received {x.dtype}; hint: ng.cast(x, 'float32') first"
        )
    return make(kind, [x])


def _binary(kind: OpType, a: Any, b: Any) -> Op:
    return make(kind, _operands((a, b), kind.value))


def negative(x: Any) -> Op:
    """-x element-wise."""
    return _unary(OpType.NEG, x)


def absolute(x: Any) -> Op:
    """|x| element-wise."""
    return _unary(OpType.ABS, x)


def exp(x: Any) -> Op:
    """e**x element-wise."""
    return _unary(OpType.EXP, x)


def log(x: Any) -> Op:
    """Natural logarithm element-wise."""
    return _unary(OpType.LOG, x)


def log1p(x: Any) -> Op:
    """log(1 + x) element-wise, accurate for small x."""
    return _unary(OpType.LOG1P, x)


def sqrt(x: Any) -> Op:
    """Square root element-wise."""
    return _unary(OpType.SQRT, x)


def rsqrt(x: Any) -> Op:
    """1 / sqrt(x) element-wise."""
    return _unary(OpType.RSQRT, x)


def square(x: Any) -> Op:
    """x*x element-wise."""
    return _unary(OpType.SQUARE, x)


def reciprocal(x: Any) -> Op:
    """1 / x element-wise."""
    return _unary(OpType.RECIPROCAL, x)


def tanh(x: Any) -> Op:
    """Hyperbolic tangent element-wise."""
    return _unary(OpType.TANH, x)


def sigmoid(x: Any) -> Op:
    """1 / (1 + e**-x) element-wise."""
    return _unary(OpType.SIGMOID, x)


def relu(x: Any) -> Op:
    """max(x, 0) element-wise."""
    return _unary(OpType.RELU, x)


def sign(x: Any) -> Op:
    """-1, 0 or 1 element-wise (no gradient)."""
    return _unary(OpType.SIGN, x)


def sin(x: Any) -> Op:
    """Sine element-wise."""
    return _unary(OpType.SIN, x)


def cos(x: Any) -> Op:
    """Cosine element-wise."""
    return _unary(OpType.COS, x)


def stop_gradient(x: Any) -> Op:
    """x, with no gradient flowing back through it."""
    return _unary(OpType.STOP_GRADIENT, x)


def cast(x: Any, dtype: Any) -> Op:
    """x converted to ``dtype`` (``"float32"``, ``"int64"``...)."""
    from .tensors import check_dtype

    x = as_op(x, where="cast")
    dtype = check_dtype(dtype, "cast")
    return x if x.dtype == dtype else make(OpType.CAST, [x], dtype=dtype)


def add(a: Any, b: Any) -> Op:
    """a + b with operands aligned by axis name."""
    return _binary(OpType.ADD, a, b)


def subtract(a: Any, b: Any) -> Op:
    """a - b with operands aligned by axis name."""
    return _binary(OpType.SUB, a, b)


def multiply(a: Any, b: Any) -> Op:
    """a * b with operands aligned by axis name."""
    return _binary(OpType.MUL, a, b)


def divide(a: Any, b: Any) -> Op:
    """a / b with operands aligned by axis name (floor division when both are integers)."""
    return _binary(OpType.DIV, a, b)


def power(a: Any, b: Any) -> Op:
    """a ** b with operands aligned by axis name."""
    return _binary(OpType.POW, a, b)


def maximum(a: Any, b: Any) -> Op:
    """Element-wise maximum (the gradient goes to ``a`` on ties)."""
    return _binary(OpType.MAXIMUM, a, b)


def minimum(a: Any, b: Any) -> Op:
    """Element-wise minimum (the gradient goes to ``a`` on ties)."""
    return _binary(OpType.MINIMUM, a, b)


def equal(a: Any, b: Any) -> Op:
    """1 where a == b else 0, in the operands' dtype."""
    return _binary(OpType.EQUAL, a, b)


def not_equal(a: Any, b: Any) -> Op:
    """1 where a != b else 0."""
    return _binary(OpType.NOT_EQUAL, a, b)


def less(a: Any, b: Any) -> Op:
    """1 where a < b else 0."""
    return _binary(OpType.LESS, a, b)


def less_equal(a: Any, b: Any) -> Op:
    """1 where a <= b else 0."""
    return _binary(OpType.LESS_EQUAL, a, b)


def greater(a: Any, b: Any) -> Op:
    """1 where a > b else 0."""
    return _binary(OpType.GREATER, a, b)


def greater_equal(a: Any, b: Any) -> Op:
    """1 where a >= b else 0."""
    return _binary(OpType.GREATER_EQUAL, a, b)


def where(condition: Any, a: Any, b: Any) -> Op:
    """``a`` where ``condition`` is nonzero, else ``b``; all three aligned by axis name.

    Example:
        >>> y = where(greater(x, 0), x, 0.1 * x)  # leaky ReLU
    """
    like = next((v for v in (a, b, condition) if isinstance(v, Op)), None)  # a number takes a branch's dtype
    return make(OpType.WHERE, align([as_op(v, like, "where") for v in (condition, a, b)], "where"))


# -- reductions -----------------------------------------------------------------------------


def kept_axes(x: Op, reduction_axes: AxisSpec, out_axes: AxisSpec, what: str) -> Axes:
    """The axes a reduction keeps: ``out_axes``, or x's axes minus ``reduction_axes``, or none."""
    if reduction_axes is not None and out_axes is not None:
        red, out = _resolve_axes(x, reduction_axes, what), _resolve_axes(x, out_axes, what)
        if not (red | out).same_set(x.axes) or (red & out):
            raise AxesError(
                f"{what}: reduction_axes {format_axes(red)} and out_axes {format_axes(out)} must split "
                f"the input's axes {format_axes(x.axes)}; hint: pass only one of them"
            )
        return out
    if out_axes is not None:
        return _resolve_axes(x, out_axes, what)
    if reduction_axes is not None:
        return x.axes - _resolve_axes(x, reduction_axes, what)
    return Axes(())


def _reduce(kind: OpType, x: Any, reduction_axes: AxisSpec, out_axes: AxisSpec) -> Op:
    x = as_op(x, where=kind.value)
    out = kept_axes(x, reduction_axes, out_axes, kind.value)
    empty = [a for a in x.axes - out if a.length == 0]
    if empty and kind in (OpType.MAX, OpType.MIN, OpType.ARGMAX, OpType.ARGMIN):
        raise AxesError(
            f"{kind.value}: cannot reduce over the empty axis {empty[0]} (it has no elements); "
            "hint: check the axis lengths, or use ng.sum, which gives 0 over an empty axis"
        )
    return x if out == x.axes and kind not in (OpType.ARGMAX, OpType.ARGMIN) else make(kind, [x], axes=out)


def sum(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:  # noqa: A001
    """Sum over ``reduction_axes`` (or keeping ``out_axes``; with neither, over every axis).

    Example:
        >>> total = sum(x, reduction_axes=[N])
    """
    return _reduce(OpType.SUM, x, reduction_axes, out_axes)


def max(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:  # noqa: A001
    """Maximum over the reduction axes (see ``sum``)."""
    return _reduce(OpType.MAX, x, reduction_axes, out_axes)


def min(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:  # noqa: A001
    """Minimum over the reduction axes (see ``sum``)."""
    return _reduce(OpType.MIN, x, reduction_axes, out_axes)


def prod(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:
    """Product over the reduction axes (see ``sum``); its gradient needs nonzero inputs."""
    return _reduce(OpType.PROD, x, reduction_axes, out_axes)


def argmax(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:
    """int64 index of the maximum along the one reduced axis (see ``sum``)."""
    return _reduce(OpType.ARGMAX, x, reduction_axes, out_axes)


def argmin(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:
    """int64 index of the minimum along the one reduced axis (see ``sum``)."""
    return _reduce(OpType.ARGMIN, x, reduction_axes, out_axes)


def mean(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:
    """Mean over the reduction axes (see ``sum``); integer inputs give float32."""
    x = as_op(x, where="mean")
    if not is_float(x.dtype):
        x = cast(x, "float32")
    out = kept_axes(x, reduction_axes, out_axes, "mean")
    count = x.axes.size // builtins.max(out.size, 1)
    return sum(x, out_axes=out) / float(count) if count != 1 else sum(x, out_axes=out)


def logsumexp(x: Any, reduction_axes: AxisSpec = None, out_axes: AxisSpec = None) -> Op:
    """log(sum(exp(x))) over the reduction axes, computed stably (max subtracted first)."""
    x = as_op(x, where="logsumexp")
    out = kept_axes(x, reduction_axes, out_axes, "logsumexp")
    m = stop_gradient(max(x, out_axes=out))
    return m + log(sum(exp(x - m), out_axes=out))


# -- contraction ------------------------------------------------------------------------


def dot(a: Any, b: Any) -> Op:
    """Contract the axes ``a`` and ``b`` share; the result has a's other axes, then b's.

    Raises:
        AxesError: a shared axis name with different lengths.

    Example:
        >>> y = dot(W, X)  # W [H, C], X [C, N] -> y [H, N]
    """
    a, b = as_op(a, where="dot"), as_op(b, where="dot")
    try:
        return make(OpType.DOT, [a, b])
    except AxesError as exc:
        raise AxesError(f"dot of {format_axes(a.axes)} and {format_axes(b.axes)}: {exc}") from None


def batch_dot(a: Any, b: Any, batch_axes: AxisSpec) -> Op:
    """A batched matrix product: contract the axes ``a`` and ``b`` share, except ``batch_axes``, which both keep.

    For each position of the batch axes this is ``dot`` of the two slices; the result has the
    batch axes (in ``batch_axes``' order), then a's other axes, then b's. Attention's
    ``q . k`` per head and example is one: ``batch_dot(q [D, H, T, N], k [D, H, S, N], [H, N])``
    gives ``[H, N, T, S]``. Its gradients are batch_dots too.

    Args:
        a, b: float tensors.
        batch_axes: axes (or names) both operands have, kept in the output.

    Raises:
        AxesError: a batch axis missing from ``a`` or ``b``, or a shared axis name with different lengths.

    Example:
        >>> scores = ng.batch_dot(q, k, ["H", "N"])  # q [D, H, T, N], k [D, H, S, N] -> [H, N, T, S]
    """
    a, b = as_op(a, where="batch_dot"), as_op(b, where="batch_dot")
    batch = _resolve_axes(a, batch_axes, "batch_dot")
    try:
        a.axes.check_compatible(b.axes)
    except AxesError as exc:
        raise AxesError(f"batch_dot of {format_axes(a.axes)} and {format_axes(b.axes)}: {exc}") from None
    if not batch.is_subset_of(b.axes):
        raise AxesError(f"batch_dot: expected batch axes {format_axes(batch)} in both operands, received "
                        f"{format_axes(a.axes)} and {format_axes(b.axes)}; hint: batch axes are shared axes kept "
                        "in the output")
    shared = a.axes & b.axes
    return make(OpType.BATCH_DOT, [a, b], axes=batch + (a.axes - shared) + (b.axes - shared))


# -- operators on Op --------------------------------------------------------------------------


def install_operators() -> None:
    """Give ``Op`` its Python operators (kept here so that ``ir`` imports nothing of the API)."""
    ops = {
        "__add__": add, "__radd__": lambda s, o: add(o, s),
        "__sub__": subtract, "__rsub__": lambda s, o: subtract(o, s),
        "__mul__": multiply, "__rmul__": lambda s, o: multiply(o, s),
        "__truediv__": divide, "__rtruediv__": lambda s, o: divide(o, s),
        "__pow__": power, "__rpow__": lambda s, o: power(o, s),
        "__neg__": negative, "__abs__": absolute,
        "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
    }
    for name, fn in ops.items():
        setattr(Op, name, fn)


install_operators()


def fill_like(x: Op, value: float) -> Op:
    """A scalar constant of x's dtype broadcast to x's axes."""
    return broadcast_to(constant(value, (), dtype=x.dtype), x.axes)
