"""Axes and leaf tensors: ``make_axis``, ``placeholder``, ``variable``, ``constant``, random tensors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..errors import AxesError, DTypeError, GraphError
from ..ir import ArrayValue, Axes, Axis, Op, OpType, RandomInfo, VariableInfo, format_axes, next_uid
from ..ir.axes import anonymous_axis_name
from ..ir.dtypes import ALL_DTYPES, FLOAT_DTYPES

AxesLike = Axes | Axis | Iterable[Axis]
InitialValue = int | float | np.ndarray | Callable[[Axes], Any]


def make_axis(length: int, name: str | None = None) -> Axis:
    """A named axis.

    Args:
        length: number of elements along the axis.
        name: the axis name; a fresh ``axis_<k>`` when omitted. ``N`` is the batch axis,
            ``REC`` the recurrent axis.

    Returns:
        Axis

    Example:
        >>> C = make_axis(4, name="C")
    """
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
        raise AxesError(
            f"make_axis{'' if name is None else f' {name!r}'}: expected an int length, received {length!r}; "
            "hint: lengths count elements, so round explicitly if you mean int(length)"
        )
    return Axis(name or anonymous_axis_name(), int(length))


def make_axes(axes: AxesLike = ()) -> Axes:
    """An ``Axes`` from axes (raises ``AxesError`` on duplicate names).

    Example:
        >>> make_axes([make_axis(4, "C"), make_axis(32, "N")])
        Axes(C:4, N:32)
    """
    return Axes(axes)


def check_dtype(dtype: Any, where: str) -> str:
    """Normalise ``dtype`` to a NumPy dtype name we support, or raise ``DTypeError``."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in ALL_DTYPES:
        raise DTypeError(f"{where}: expected a dtype among {ALL_DTYPES}, received {dtype!r}")
    return name


def placeholder(axes: AxesLike, dtype: Any = "float32", name: str | None = None) -> Op:
    """An input fed at run time, positionally, to a computation.

    Args:
        axes: its axes; a fed array must have exactly these lengths, in this order.
        dtype: element type (default float32).
        name: shown in plans and in feed errors.

    Returns:
        a ``placeholder`` op.

    Example:
        >>> X = placeholder([make_axis(4, "C"), make_axis(32, "N")], name="X")
    """
    return Op(OpType.PLACEHOLDER, (), make_axes(axes), check_dtype(dtype, "placeholder"), next_uid(),
              name=name, labels={"placeholder"})


def variable(axes: AxesLike, initial_value: InitialValue = 0.0, dtype: Any = "float32", name: str | None = None,
             trainable: bool = True, labels: Iterable[str] = ()) -> Op:
    """A persistent tensor held by the transformer and shared by all its computations.

    Args:
        axes: its axes.
        initial_value: a number (filled), an array of the axes' shape, or a callable
            ``(axes) -> array`` called once when a transformer first needs the variable.
        dtype: element type (default float32).
        name: shown in plans, selectors and saved weights.
        trainable: adds the ``trainable`` label optimizers look for.
        labels: more free labels (``weight``, ``bias``...).

    Returns:
        a ``variable`` op.

    Raises:
        AxesError: an array initial value whose shape is not the axes' lengths.

    Example:
        >>> W = variable([make_axis(4, "C")], initial_value=0, name="W")
    """
    axes = make_axes(axes)
    dtype = check_dtype(dtype, "variable")
    if isinstance(initial_value, np.ndarray) or isinstance(initial_value, (list, tuple)):
        array = np.asarray(initial_value)
        if array.shape != axes.lengths:
            raise AxesError(
                f"variable {name or ''}: initial value has shape {array.shape}, expected {axes.lengths} "
                f"for axes {format_axes(axes)}; hint: reshape the array or change the axes"
            )
        initial_value = array.astype(dtype, copy=True)
    elif not (callable(initial_value) or isinstance(initial_value, (int, float, np.number))):
        raise DTypeError(
            f"variable {name or ''}: initial_value must be a number, an array or a callable(axes), "
            f"received {type(initial_value).__name__}"
        )
    tags = set(labels) | {"variable"} | ({"trainable"} if trainable else set())
    return Op(OpType.VARIABLE, (), axes, dtype, VariableInfo(next_uid(), initial_value), name=name, labels=tags)


def constant(value: Any, axes: AxesLike | None = None, dtype: Any = None, name: str | None = None) -> Op:
    """A constant tensor.

    Args:
        value: a number (filled over ``axes``) or an array (of the axes' shape).
        axes: its axes; () for a scalar. An array given without axes gets generated axis names.
        dtype: element type; default float32 for floats, the value's own for ints and bools.
        name: optional name.

    Returns:
        a ``constant`` op.

    Example:
        >>> two = constant(2.0)
    """
    array = np.asarray(value)
    if dtype is None:
        dtype = "float32" if array.dtype.kind in "fc" else array.dtype.name
    dtype = check_dtype(dtype, "constant")
    if axes is None:
        axes = Axes(make_axis(n) for n in array.shape)
    axes = make_axes(axes)
    if array.ndim == 0:
        # keep a float at full precision: a float32 graph run as float64 should see 0.1, not 0.100000001
        kind = np.dtype(dtype).kind
        arg: Any = float(array) if kind == "f" else bool(array) if kind == "b" else int(array)
    else:
        if array.shape != axes.lengths:
            raise AxesError(
                f"constant: value has shape {array.shape}, expected {axes.lengths} for axes {format_axes(axes)}"
            )
        arg = ArrayValue(array, dtype)
    return Op(OpType.CONSTANT, (), axes, dtype, arg, name=name)


def _random(kind: OpType, axes: AxesLike, a: float, b: float, seed: int | None, dtype: Any, name: str | None) -> Op:
    dtype = check_dtype(dtype, kind.value)
    if dtype not in FLOAT_DTYPES:
        raise DTypeError(f"{kind.value}: expected a float dtype among {FLOAT_DTYPES}, received {dtype!r}; "
                         f"hint: draw floats, then ng.cast the result")
    if seed is not None and not (isinstance(seed, (int, np.integer)) and 0 <= int(seed) < 2**64):
        raise GraphError(f"{kind.value}: expected a seed in [0, 2**64) or None, received {seed!r}; hint: pass "
                         "seed=0 or a positive int")
    info = RandomInfo(next_uid(), float(a), float(b), None if seed is None else int(seed))
    return Op(kind, (), make_axes(axes), dtype, info, name=name)


def uniform(axes: AxesLike, low: float = 0.0, high: float = 1.0, seed: int | None = None, dtype: Any = "float32",
            name: str | None = None) -> Op:
    """Fresh uniform samples in [low, high) on every execution.

    Args:
        axes: its axes.
        low, high: the interval.
        seed: seeds this op's own generator (reproducible runs); otherwise the
            transformer's seed is used.

    Example:
        >>> noise = uniform([make_axis(8, "C")], -1, 1, seed=0)
    """
    return _random(OpType.UNIFORM, axes, low, high, seed, dtype, name)


def normal(axes: AxesLike, mean: float = 0.0, std: float = 1.0, seed: int | None = None, dtype: Any = "float32",
           name: str | None = None) -> Op:
    """Fresh normal samples N(mean, std**2) on every execution (see ``uniform`` for ``seed``).

    Example:
        >>> noise = normal([make_axis(8, "C")], 0.0, 0.1, seed=0)
    """
    return _random(OpType.NORMAL, axes, mean, std, seed, dtype, name)


def as_op(value: Any, like: Op | None = None, where: str = "op") -> Op:
    """``value`` as an op: ops pass through; Python numbers become scalar constants of ``like``'s dtype."""
    if isinstance(value, Op):
        return value
    if isinstance(value, (bool, int, float, np.number)):
        dtype = like.dtype if like is not None else ("float32" if isinstance(value, float) else None)
        return constant(value, (), dtype=dtype)
    if isinstance(value, np.ndarray):
        raise AxesError(
            f"{where}: received a NumPy array of shape {value.shape}, which has no named axes; "
            "hint: wrap it with ng.constant(array, axes=[...]) or feed it through ng.placeholder"
        )
    raise DTypeError(f"{where}: expected an op or a number, received {type(value).__name__}")
