"""Connectionist temporal classification (CTC): the ops' arg, axis roles and inference rules.

Two ops share these, both over the same four sources
``(logits, labels, input_lengths, label_lengths)``:

* ``ctc`` -> ``[N]``: each example's negative log-likelihood ``-log p(labels | logits)``;
* ``ctc_grad`` -> the logits' axes: ``d sum_n ctc[n] / d logits`` (``softmax - posteriors``),
  which the gradient rule scales by the upstream gradient of each example.

Axis roles are read by *name*, so the axes may stand in any order:

* **logits** ``[C, REC, N]``: unnormalized scores; ``N`` (batch) and ``REC`` (time) by their
  names, the class axis ``C`` (blank included) is the one other axis. The ops apply
  ``log_softmax`` over ``C`` themselves (as warp-ctc and neon do): the gradient is then
  ``softmax - posteriors``, cheap and stable;
* **labels** ``[L, N]``: int class ids, padded: only the first ``label_lengths[n]`` of
  example ``n`` are read; any one non-batch axis ``L``;
* **input_lengths**, **label_lengths** ``[N]``: ints, the valid frames of each example
  (``0 <= input_lengths <= REC``) and its label count (``0 <= label_lengths <= L``).

Example:
    >>> make(OpType.CTC, [logits, labels, input_lengths, label_lengths], arg=CTCArg(blank=0))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AxesError, DTypeError
from .axes import Axes, Axis, format_axes
from .codec import CodecContext, check_keys, check_type, wrong_arg

if TYPE_CHECKING:
    from .node import Op

CTC_FLOAT_DTYPES = ("float32", "float64")
CTC_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")


@dataclass(frozen=True)
class CTCArg:
    """``arg`` of ``ctc`` and ``ctc_grad``.

    Attributes:
        blank: the class id of the blank symbol (``0 <= blank < C``).
        zero_infinity: an example no alignment can explain (its labels, with a blank
            between repeats, need more frames than it has) gets loss 0 and gradient 0
            instead of ``inf`` and NaN (PyTorch's ``zero_infinity``).
    """

    blank: int = 0
    zero_infinity: bool = False

    def __repr__(self) -> str:
        return f"blank={self.blank}" + (" zero_infinity" if self.zero_infinity else "")

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a CTCArg of an int blank and a bool flag, else None."""
        arg = op.arg
        ok = isinstance(arg, CTCArg) and type(arg.blank) is int and type(arg.zero_infinity) is bool
        return None if ok else wrong_arg(op, "a CTCArg(blank: int, zero_infinity: bool)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"blank", "zero_infinity"}``."""
        return {"blank": op.arg.blank, "zero_infinity": op.arg.zero_infinity}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> CTCArg:
        """The CTCArg ``to_json`` wrote; raises ``SerializationError`` on any other data."""
        check_keys(data, ("blank", "zero_infinity"), where)
        return CTCArg(check_type(data["blank"], int, where, "an int blank"),
                      check_type(data["zero_infinity"], bool, where, "true or false"))


@dataclass(frozen=True)
class CTCRoles:
    """The roles of the logits' axes: ``perm`` views an array of them as ``(REC, N, C)``."""

    classes: Axis
    time: Axis
    batch: Axis
    perm: tuple[int, ...]


def ctc_roles(axes: Axes, what: str) -> CTCRoles:
    """The roles of logits ``axes`` ``[C, REC, N]`` (any order); raises ``AxesError`` otherwise."""
    batch, time = axes.batch_axis, axes.recurrent_axis
    rest = [a for a in axes if not (a.is_batch or a.is_recurrent)]
    if batch is None or time is None or len(rest) != 1:
        raise AxesError(
            f"{what}: expected logits [C, REC, N]: a batch axis N, a time axis REC and one class axis, "
            f"received {format_axes(axes)}; hint: name the time axis 'REC' and the batch axis 'N', and flatten "
            "any other axes into the classes"
        )
    return CTCRoles(rest[0], time, batch, tuple(axes.index(a) for a in (time, batch, rest[0])))


def _check_int(x: Op, role: str, what: str) -> None:
    if x.dtype not in CTC_INT_DTYPES:
        raise DTypeError(f"{what}: expected int {role}, received {x.dtype}; hint: ng.cast(x, 'int32') first")


def _check_sources(src: Sequence[Op], arg: Any, what: str) -> CTCRoles:
    """Check the four sources of ``ctc`` / ``ctc_grad``; returns the logits' roles."""
    logits, labels, input_lengths, label_lengths = src
    if logits.dtype not in CTC_FLOAT_DTYPES:
        raise DTypeError(f"{what}: expected float32 or float64 logits, received {logits.dtype}; "
                         "hint: ng.cast(logits, 'float32') first")
    roles = ctc_roles(logits.axes, what)
    if not isinstance(arg, CTCArg) or not 0 <= arg.blank < roles.classes.length:
        blank = arg.blank if isinstance(arg, CTCArg) else arg
        raise AxesError(f"{what}: expected a blank class id in [0, {roles.classes.length}) for the class axis "
                        f"{roles.classes}, received {blank!r}; hint: the class axis counts the blank too")
    label_rest = [a for a in labels.axes if not a.is_batch]
    if labels.axes.batch_axis != roles.batch or len(label_rest) != 1 or labels.axes.recurrent_axis is not None:
        raise AxesError(
            f"{what}: expected labels [L, {roles.batch}] (one label axis besides the logits' batch axis), "
            f"received {format_axes(labels.axes)}; hint: pad the labels of a batch to one length L"
        )
    _check_int(labels, "labels", what)
    for role, x in (("input_lengths", input_lengths), ("label_lengths", label_lengths)):
        if x.axes != Axes([roles.batch]):
            raise AxesError(f"{what}: expected {role} with axes [{roles.batch}], received {format_axes(x.axes)}")
        _check_int(x, role, what)
    return roles


def infer_ctc(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``ctc``: ``[N]`` in the logits' dtype."""
    roles = _check_sources(src, arg, "ctc")
    return Axes([roles.batch]), src[0].dtype


def infer_ctc_grad(src: Sequence[Op], arg: Any, axes: Axes | None, dtype: str | None) -> tuple[Axes, str]:
    """``ctc_grad``: the logits' axes and dtype."""
    _check_sources(src, arg, "ctc_grad")
    return src[0].axes, src[0].dtype
