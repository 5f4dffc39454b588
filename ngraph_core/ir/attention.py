"""The compiler-made ``fused_attention`` op: scaled dot-product attention computed by one kernel.

``ng.scaled_dot_product_attention`` builds a composite (``batch_dot``, masking, ``softmax``,
``batch_dot``: ``api/attention.py``) whose scores ``[*kept, REC, REC_K]`` are materialized. Where the
weights have no other use (inference, a forward-only graph) and the scores are large,
``passes/attention.py`` replaces the composite by one ``fused_attention`` op, whose kernel walks the key time
in tiles with an online softmax and never holds the whole score matrix
(``transformers/kernels/attention.py``).

``fused_attention(q, k, v[, key_lengths])`` (arg: ``AttentionArg``):

* ``q``: the queries, with the feature axis ``arg.feature``, the query time ``REC`` and the kept axes
  (heads, batch); ``k``: the same feature axis and kept axes, and the key time ``REC_K``; ``v``: the kept
  axes, ``REC_K`` and one feature axis of its own;
* ``key_lengths`` (optional): integer ``[N]``, ``N`` a kept axis: each example's visible key steps;
* the output: the kept axes, ``REC`` and ``v``'s feature axis, in the order given (the composite's last
  ``batch_dot``'s order).

Query step ``i`` sees key step ``j`` when ``j < key_lengths[n]`` and, with ``arg.causal``, ``j <= i``
(aligned top-left, as the composite). A query that sees no key gives zeros.

Example:
    >>> make(OpType.FUSED_ATTENTION, [q, k, v], arg=AttentionArg("D", 0.125, causal=True), axes=[H, N, REC, DV])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AxesError, DTypeError
from .axes import RECURRENT_AXIS_NAME, Axes, format_axes
from .codec import CompilerMadeArg, wrong_arg

if TYPE_CHECKING:
    from .node import Op

KEY_TIME = "REC_K"
"""The key time's axis name (``api/attention.KEY_TIME``; the IR cannot import the API)."""

_FLOATS = ("float16", "float32", "float64")


@dataclass(frozen=True)
class AttentionArg(CompilerMadeArg):
    """``arg`` of the compiler-made ``fused_attention`` op.

    Attributes:
        feature: the name of the axis ``q`` and ``k`` contract.
        scale: multiplies the scores (``1 / sqrt(len(feature))`` by default in the API).
        causal: query step ``i`` sees key steps ``j <= i`` only.
    """

    feature: str
    scale: float
    causal: bool = False
    USER_OPS = "'batch_dot' (ng.scaled_dot_product_attention)"

    def __repr__(self) -> str:
        return f"{self.feature} scale={self.scale:g}" + (" causal" if self.causal else "")

    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not an AttentionArg of a name, a finite positive scale and a flag."""
        arg = op.arg
        ok = (isinstance(arg, AttentionArg) and isinstance(arg.feature, str) and isinstance(arg.causal, bool)
              and isinstance(arg.scale, float) and math.isfinite(arg.scale) and arg.scale > 0)
        return None if ok else wrong_arg(op, "an AttentionArg(feature, scale > 0, causal) (made by fuse_attention)")


def attention_roles(q: Axes, k: Axes, v: Axes, feature: str) -> tuple[Axes, Axes, Axes]:
    """``(kept, query and key time, v's feature)`` of a ``fused_attention`` op's operands, checked.

    Args:
        q, k, v: the operands' axes.
        feature: the name of the axis ``q`` and ``k`` contract.

    Returns:
        the kept axes in ``q``'s order, ``Axes([REC, REC_K])`` and ``Axes([v's feature])``.

    Raises:
        AxesError: an operand without its time axis or the feature axis, or axes that do not line up.

    Example:
        >>> attention_roles(q.axes, k.axes, v.axes, "D")  # q [D, H, REC, N] -> ([H, N], [REC, REC_K], [DV])
    """
    query, key, feat = q.find(RECURRENT_AXIS_NAME), k.find(KEY_TIME), q.find(feature)
    if query is None or key is None or feat is None or k.find(feature) != feat:
        raise AxesError(f"fused_attention: expected q [{feature}, ..., {RECURRENT_AXIS_NAME}] and k [{feature}, ..., "
                        f"{KEY_TIME}], received {format_axes(q)} and {format_axes(k)}; hint: the fuse_attention "
                        "pass makes this op from ng.scaled_dot_product_attention")
    kept = q - Axes([feat, query])
    if not k.same_set(kept + Axes([feat, key])):
        raise AxesError(f"fused_attention: expected keys with axes {format_axes(kept + Axes([feat, key]))} (any "
                        f"order), received {format_axes(k)}; hint: q and k share every axis but their time")
    rest = v - kept - Axes([key])
    if len(rest) != 1 or not v.same_set(kept + Axes([key]) + rest) or rest[0] in kept:
        raise AxesError(f"fused_attention: expected values with the kept axes {format_axes(kept)}, {KEY_TIME} and one "
                        f"feature axis, received {format_axes(v)}; hint: keys and values come from one sequence")
    return kept, Axes([query, key]), rest


def infer_attention(src: Sequence[Op], arg: Any, axes: Any, dtype: str | None) -> tuple[Axes, str]:
    """The given output axes (a reordering of kept + ``REC`` + v's feature; None: that order) and q's dtype.

    Raises:
        AxesError: not 3 or 4 sources, no ``AttentionArg``, operands that do not line up (``attention_roles``),
            output axes that are not such a reordering, ``key_lengths`` not an integer op over one kept axis.
        DTypeError: q, k and v not of one float dtype.
    """
    if len(src) not in (3, 4):
        raise AxesError(f"fused_attention: expected 3 or 4 inputs (q, k, v[, key_lengths]), received {len(src)}")
    if not isinstance(arg, AttentionArg):
        raise AxesError(f"fused_attention: expected an AttentionArg, received {type(arg).__name__}; hint: the "
                        "fuse_attention pass makes this op")
    q, k, v = src[:3]
    if q.dtype not in _FLOATS or k.dtype != q.dtype or v.dtype != q.dtype:
        raise DTypeError(f"fused_attention: expected q, k and v of one float dtype, received {q.dtype}, {k.dtype}, "
                         f"{v.dtype}; hint: ng.cast them first")
    kept, times, v_feature = attention_roles(q.axes, k.axes, v.axes, arg.feature)
    natural = kept + Axes([times[0]]) + v_feature
    out = natural if axes is None else Axes(axes)
    if not out.same_set(natural):
        raise AxesError(f"fused_attention: expected output axes ordering {format_axes(natural)}, received "
                        f"{format_axes(out)}; hint: the kept axes, the query time and v's features")
    if len(src) == 4:
        lengths = src[3]
        if lengths.dtype not in ("int8", "int16", "int32", "int64", "uint8") or len(lengths.axes) != 1 \
                or lengths.axes[0] not in kept:
            raise AxesError(f"fused_attention: expected integer key_lengths over one kept axis of {format_axes(kept)}, "
                            f"received {format_axes(lengths.axes)} {lengths.dtype}; hint: an int [N] op")
    return out, q.dtype
