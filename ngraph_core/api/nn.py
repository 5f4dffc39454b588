"""Neural-network composites built from primitives: softmax, log_softmax, gelu, cross-entropies, batch_size.

Only primitives have gradient rules; these are compositions, so autodiff sees
the primitives. The cross-entropies recognise a softmax/sigmoid producer and
work from its logits, which keeps them finite where ``log(softmax)`` would
underflow.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import AxesError
from ..ir import Axes, Op, OpType, format_axes
from .extra_math import erf
from .math import (
    AxisSpec,
    _resolve_axes,
    absolute,
    exp,
    log,
    log1p,
    logsumexp,
    maximum,
    stop_gradient,
    sum,
    tanh,
)
from .tensors import as_op, constant

_TINY = 1e-30


def _normalization_axes(x: Op, normalization_axes: AxisSpec) -> Axes:
    if normalization_axes is None:
        axes = Axes(a for a in x.axes if not a.is_batch)
    else:
        axes = _resolve_axes(x, normalization_axes, "softmax")
    if len(axes) == 0:
        raise AxesError(
            f"softmax: no axes to normalize over in {format_axes(x.axes)}; "
            "hint: pass normalization_axes= explicitly"
        )
    return axes


def softmax(x: Any, normalization_axes: AxisSpec = None) -> Op:
    """exp(x) / sum(exp(x)) over ``normalization_axes`` (default: every non-batch axis), stably.

    Example:
        >>> probs = softmax(logits)  # logits [Y, N]
    """
    x = as_op(x, where="softmax")
    out = x.axes - _normalization_axes(x, normalization_axes)
    e = exp(x - stop_gradient(_max(x, out)))
    return e / sum(e, out_axes=out)


def log_softmax(x: Any, normalization_axes: AxisSpec = None) -> Op:
    """x - logsumexp(x) over ``normalization_axes`` (default: every non-batch axis)."""
    x = as_op(x, where="log_softmax")
    out = x.axes - _normalization_axes(x, normalization_axes)
    return x - logsumexp(x, out_axes=out)


def _max(x: Op, out: Axes) -> Op:
    from .math import max as reduce_max

    return reduce_max(x, out_axes=out)


def softmax_logits(y_hat: Op) -> tuple[Op, Axes] | None:
    """If ``y_hat`` was built by ``softmax``, its input and the kept axes; else None."""
    if y_hat.op is not OpType.DIV:
        return None
    e, denom = y_hat.src
    if denom.op is OpType.BROADCAST:
        denom = denom.src[0]
    if e.op is not OpType.EXP or denom.op is not OpType.SUM or denom.src[0] is not e:
        return None
    shifted = e.src[0]
    if shifted.op is not OpType.SUB:
        return None
    return shifted.src[0], denom.axes


def _check_targets(y_hat: Op, y: Op, what: str) -> None:
    if not y.axes.same_set(y_hat.axes):
        raise AxesError(
            f"{what}: targets have axes {format_axes(y.axes)}, predictions {format_axes(y_hat.axes)}; "
            "expected the same axes; hint: one-hot encode labels with ng.one_hot"
        )


def cross_entropy_multi(y_hat: Any, y: Any, out_axes: AxisSpec = ()) -> Op:
    """-sum(y * log(y_hat)) over every axis not in ``out_axes``.

    When ``y_hat`` is a ``softmax`` output, the log-softmax of its logits is used,
    which is exact where ``log(y_hat)`` would underflow.

    Example:
        >>> loss = cross_entropy_multi(softmax(logits), one_hot_targets) / batch_size(logits)
    """
    y_hat, y = as_op(y_hat, where="cross_entropy_multi"), as_op(y, where="cross_entropy_multi")
    _check_targets(y_hat, y, "cross_entropy_multi")
    found = softmax_logits(y_hat)
    if found is not None:
        logits, kept = found
        log_p = logits - logsumexp(logits, out_axes=kept)
    else:
        log_p = log(maximum(y_hat, _TINY))
    return -sum(y * log_p, out_axes=_resolve_axes(y_hat, out_axes or None, "cross_entropy_multi"))


def softplus(x: Any) -> Op:
    """log(1 + exp(x)), stably: max(x, 0) + log1p(exp(-|x|))."""
    x = as_op(x, where="softplus")
    return maximum(x, 0.0) + log1p(exp(-absolute(x)))


GELU_APPROXIMATIONS = ("none", "tanh")


def gelu(x: Any, approximate: str = "none") -> Op:
    """The Gaussian error linear unit ``x * Phi(x)`` (Hendrycks & Gimpel), element-wise.

    ``approximate="none"`` is the exact form ``0.5 * x * (1 + erf(x / sqrt(2)))``; ``"tanh"`` is
    ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``. Both match PyTorch's
    ``nn.functional.gelu`` of the same ``approximate``.

    Design: a composite of primitives (``erf`` or ``tanh``, products and sums), not an op of its
    own: its gradient comes from autodiff through ``erf``/``tanh``, and the element-wise chain
    fuses with its neighbours (a dot head, the residual add) into one kernel like any other.

    Args:
        x: a float tensor.
        approximate: ``"none"`` (exact) or ``"tanh"``.

    Raises:
        ValueError: another ``approximate``.

    Example:
        >>> h = ng.gelu(ng.dot(W, x) + b)
    """
    x = as_op(x, where="gelu")
    if approximate == "none":
        return 0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + tanh(inner))
    raise ValueError(f"gelu: expected approximate in {GELU_APPROXIMATIONS}, received {approximate!r}; "
                     "hint: 'none' for the exact erf form, 'tanh' for the approximation (as PyTorch)")


def cross_entropy_binary(y_hat: Any, y: Any, out_axes: AxisSpec = ()) -> Op:
    """-sum(y log(y_hat) + (1 - y) log(1 - y_hat)) over every axis not in ``out_axes``.

    When ``y_hat`` is a ``sigmoid`` output this is computed from its logits z as
    softplus(z) - y*z, finite for any z.

    Example:
        >>> loss = cross_entropy_binary(sigmoid(z), targets) / batch_size(z)
    """
    y_hat, y = as_op(y_hat, where="cross_entropy_binary"), as_op(y, where="cross_entropy_binary")
    _check_targets(y_hat, y, "cross_entropy_binary")
    if y_hat.op is OpType.SIGMOID:
        z = y_hat.src[0]
        per_element = softplus(z) - y * z
    else:
        per_element = -(y * log(maximum(y_hat, _TINY)) + (1.0 - y) * log(maximum(1.0 - y_hat, _TINY)))
    return sum(per_element, out_axes=_resolve_axes(y_hat, out_axes or None, "cross_entropy_binary"))


def batch_size(x: Any) -> Op:
    """The length of ``x``'s batch axis (``N``) as a float32 scalar constant.

    Raises:
        AxesError: ``x`` has no batch axis.
    """
    x = as_op(x, where="batch_size")
    axis = x.axes.batch_axis
    if axis is None:
        raise AxesError(f"batch_size: {format_axes(x.axes)} has no batch axis; hint: name the batch axis 'N'")
    return constant(float(axis.length), (), name="batch_size")


