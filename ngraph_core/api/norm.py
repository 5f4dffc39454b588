"""Batch and layer normalization, and the statistics they are built from.

``batch_norm`` normalizes per *feature*: the axes of ``gamma`` (e.g. ``[C]``) are kept and
the statistics are taken over every other axis of ``x`` (``H, W, N`` of ``[C, H, W, N]``,
``N`` of ``[F, N]``). Axes are matched by name, so the feature axis may stand anywhere.

* **Training form** (no ``mean``/``var`` given): the batch statistics, from one
  ``moments`` op. The forward is element-wise around them (``(x - mean) * rsqrt(var + eps)
  * gamma + beta``), so the compiler fuses it with a following activation. Its gradient is
  the closed form (Ioffe & Szegedy 2015, eq. in sec. 3) rather than autodiff through the
  statistics: one ``centered_sums`` op (``sum(dy)``, ``sum(dy * (x - mean))``) and one
  element-wise pass for ``dx``, where differentiating the composite read and wrote the
  activation about ten times.
* **Inference form** (``mean`` and ``var`` given, e.g. running averages): the same
  element-wise expression over them; the compiler folds it into a preceding conv or dot
  (``passes/bn_fold.py``).

``layer_norm`` normalizes per *example*: the statistics are taken over the named axes given
(the features, e.g. ``[F]`` of ``[F, REC, N]``) and kept for every other axis. It is a
composite (one ``moments`` op, then element-wise ops that fuse), so autodiff gives its gradient.
"""

from __future__ import annotations

from typing import Any

from ..errors import AxesError
from ..ir import Axes, Op, OpType, format_axes, make
from ..ir.infer import MOMENTS_AXIS
from .custom import custom_gradient
from .math import AxisSpec, _resolve_axes, broadcast_to, rsqrt
from .shape import slice_along_axis
from .tensors import as_op, constant


def moments(x: Any, out_axes: Any) -> tuple[Op, Op]:
    """The mean and biased variance of ``x`` over the axes not in ``out_axes``, from one ``moments`` op.

    Args:
        x: a float tensor.
        out_axes: the kept (per-feature) axes, e.g. ``[C]`` of ``[C, H, W, N]``.

    Returns:
        ``(mean, var)``, each with axes ``out_axes``.

    Example:
        >>> mean, var = ng.moments(x, [C])  # over H, W, N
    """
    x = as_op(x, where="moments")
    stats = make(OpType.MOMENTS, [x], axes=Axes(out_axes))
    return slice_along_axis(stats, MOMENTS_AXIS, 0), slice_along_axis(stats, MOMENTS_AXIS, 1)


def centered_sums(dy: Any, x: Any, mean: Any) -> tuple[Op, Op]:
    """``sum(dy)`` and ``sum(dy * (x - mean))`` over the axes of ``x`` not in ``mean``'s, from one op.

    The two reductions batch normalization's gradient needs (``mean`` keeps the feature axes).

    Example:
        >>> s_dy, s_dyx = ng.centered_sums(dy, x, mean)  # each [C]
    """
    dy, x, mean = as_op(dy, where="centered_sums"), as_op(x, where="centered_sums"), as_op(mean, where="centered_sums")
    sums = make(OpType.CENTERED_SUMS, [dy, x, mean])
    return slice_along_axis(sums, MOMENTS_AXIS, 0), slice_along_axis(sums, MOMENTS_AXIS, 1)


def _like(value: Op, target: Op) -> Op:
    """``value`` in ``target``'s axes order (the same axes)."""
    return value if value.axes == target.axes else broadcast_to(value, target.axes)


def _normalize(x: Op, mean: Op, var: Op, gamma: Op, beta: Op, eps: Op) -> Op:
    inv = rsqrt(var + eps)
    return (x - broadcast_to(mean, x.axes)) * broadcast_to(inv, x.axes) * broadcast_to(gamma, x.axes) + \
        broadcast_to(beta, x.axes)


@custom_gradient(name="ngraph_core.batch_norm_training")
def _batch_norm_training(x: Op, gamma: Op, beta: Op, eps: Op) -> tuple[Op, Any]:
    """Training-form batch norm: the batch statistics' closed-form gradient (see the module docstring)."""
    mean, var = moments(x, gamma.axes)
    y = _normalize(x, mean, var, gamma, beta, eps)

    def grad(dy: Op) -> list[Op | None]:
        count = x.axes.size // gamma.axes.size
        inv = rsqrt(var + eps)
        sum_dy, sum_dyx = centered_sums(dy, x, mean)
        dgamma = sum_dyx * inv
        # dx = gamma * inv * (dy - mean(dy) - (x - mean) * inv * mean(dy * xhat))
        scale = gamma * inv
        shift = sum_dy * (1.0 / count)
        slope = dgamma * inv * (1.0 / count)
        dx = broadcast_to(scale, x.axes) * (
            dy - broadcast_to(shift, x.axes) - (x - broadcast_to(mean, x.axes)) * broadcast_to(slope, x.axes))
        return [dx, _like(dgamma, gamma), _like(sum_dy, beta), None]

    return y, grad


def batch_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5, mean: Any = None, var: Any = None) -> Op:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` per feature (see the module docstring).

    Args:
        x: the input, e.g. ``[C, H, W, N]`` or ``[F, N]``.
        gamma: the scale; its axes are the feature axes (e.g. ``[C]``), kept by the statistics.
        beta: the shift, with ``gamma``'s axes.
        eps: added to the variance, > 0.
        mean, var: the statistics to normalize with (inference form); both None for the batch's
            own (training form).

    Raises:
        AxesError: ``gamma``/``beta``/``mean``/``var`` axes that are not the same feature axes of ``x``.
        ValueError: ``eps`` not positive, or only one of ``mean`` and ``var`` given.

    Example:
        >>> y = ng.relu(ng.batch_norm(conv, gamma, beta, eps=1e-3))  # training: batch statistics
    """
    x = as_op(x, where="batch_norm")
    gamma, beta = as_op(gamma, where="batch_norm"), as_op(beta, where="batch_norm")
    if not eps > 0:
        raise ValueError(f"batch_norm: expected eps > 0, received {eps!r}; hint: 1e-5 (PyTorch) or 1e-3 (neon)")
    features = gamma.axes
    checks = [("gamma", gamma), ("beta", beta)] + [(n, v) for n, v in (("mean", mean), ("var", var)) if v is not None]
    if not len(features) or not features.is_subset_of(x.axes) or features == x.axes:
        raise AxesError(
            f"batch_norm: expected gamma's axes to be feature axes of x {format_axes(x.axes)} (at least one axis "
            f"left to normalize over), received {format_axes(features)}; hint: gamma = ng.variable([C], 1.0)"
        )
    for name, value in checks:
        value_axes = as_op(value, where="batch_norm").axes
        if not value_axes.same_set(features):
            raise AxesError(
                f"batch_norm: expected {name} with gamma's axes {format_axes(features)}, received "
                f"{format_axes(value_axes)}"
            )
    eps_op = constant(float(eps), (), dtype=x.dtype)
    if mean is None and var is None:
        return _batch_norm_training(x, gamma, beta, eps_op)
    if mean is None or var is None:
        raise ValueError("batch_norm: expected both mean and var (inference form) or neither (training form)")
    return _normalize(x, as_op(mean, where="batch_norm"), as_op(var, where="batch_norm"), gamma, beta, eps_op)


def layer_norm(x: Any, axes: AxisSpec, gamma: Any = None, beta: Any = None, eps: float = 1e-5) -> Op:
    """``(x - mean) / sqrt(var + eps) * gamma + beta``, the statistics over ``axes`` (Ba et al. 2016).

    The mean and the biased variance are taken over ``axes`` for each position of the other
    axes (each time step of each example of ``[F, REC, N]`` when ``axes`` is ``[F]``), as
    PyTorch's ``nn.LayerNorm`` over its last dims.

    Args:
        x: a float tensor.
        axes: the normalized axes (``Axis`` objects or names), e.g. ``[F]``.
        gamma: the scale, with axes among ``axes`` (usually exactly ``axes``); None for 1.
        beta: the shift, with axes among ``axes``; None for 0.
        eps: added to the variance, > 0.

    Returns:
        An op with ``x``'s axes.

    Raises:
        AxesError: ``axes`` not axes of ``x``, or ``gamma``/``beta`` with an axis outside ``axes``.
        ValueError: ``eps`` not positive.

    Example:
        >>> y = ng.layer_norm(x, [F], gamma, beta)  # x [F, REC, N]; gamma, beta [F]
    """
    x = as_op(x, where="layer_norm")
    if not eps > 0:
        raise ValueError(f"layer_norm: expected eps > 0, received {eps!r}; hint: 1e-5 (PyTorch's default)")
    normalized = _resolve_axes(x, axes, "layer_norm")
    if len(normalized) == 0:
        raise AxesError(f"layer_norm: expected at least one axis of {format_axes(x.axes)} to normalize over, "
                        "received none; hint: pass the feature axes, e.g. ng.layer_norm(x, [F])")
    mean, var = moments(x, x.axes - normalized)
    y = (x - broadcast_to(mean, x.axes)) * broadcast_to(rsqrt(var + constant(float(eps), (), dtype=x.dtype)), x.axes)
    for name, value in (("gamma", gamma), ("beta", beta)):
        if value is None:
            continue
        value = as_op(value, where="layer_norm")
        if not value.axes.is_subset_of(normalized):
            raise AxesError(f"layer_norm: expected {name} with axes among the normalized {format_axes(normalized)}, "
                            f"received {format_axes(value.axes)}; hint: {name} = ng.variable([F], ...) for axes=[F]")
        y = y * broadcast_to(value, x.axes) if name == "gamma" else y + broadcast_to(value, x.axes)
    return y
