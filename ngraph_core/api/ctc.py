"""``ctc_loss``: the connectionist temporal classification loss (Graves et al., 2006) as one op.

The loss of a batch of label sequences given per-frame class scores, summed over every
alignment of the labels to the frames (with blanks between and around the labels, and a
label repeated over consecutive frames), computed in log space so long sequences stay
finite. Its gradient is a second op (``ctc_grad``) that recomputes the forward variables
and adds the backward ones; there is no gradient to the labels or lengths.

Conventions (see ``ngraph_core/ir/ctc.py`` for the axis roles):

* **logits** ``[C, REC, N]`` in any order, *unnormalized*: the op applies ``log_softmax``
  over the class axis itself, as warp-ctc and neon do. Log-probabilities may be passed
  as well (``log_softmax`` leaves them unchanged), but probabilities may not;
* **labels** ``[L, N]`` ints, padded to a common length; **input_lengths** and
  **label_lengths** ``[N]`` ints. NumPy arrays and lists are accepted and become constants;
* the result is ``[N]``: each example's negative log-likelihood, float like the logits.
  Reduce it yourself (``ng.sum`` / ``ng.mean``; PyTorch's ``reduction="mean"`` also divides
  by the label lengths).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AxesError, DTypeError
from ..ir import Axis, Op, OpType, make
from ..ir.ctc import CTCArg, ctc_roles
from .tensors import as_op, constant, make_axis


def _as_int_op(value: Any, axes: list[Axis], role: str) -> Op:
    """``value`` as an op: an op passes through; an int array becomes a constant with ``axes``."""
    if isinstance(value, Op):
        return value
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise DTypeError(f"ctc_loss: expected integer {role}, received an array of dtype {array.dtype}; "
                         "hint: np.asarray(values, dtype=np.int32)")
    if array.shape != tuple(a.length for a in axes):
        shape = tuple(a.length for a in axes)
        raise AxesError(f"ctc_loss: expected {role} of shape {shape} ({', '.join(a.name for a in axes)}), "
                         f"received shape {array.shape}; hint: labels are [L, N], lengths [N]")
    return constant(array.astype(np.int32), axes, dtype="int32")


def ctc_loss(logits: Any, labels: Any, input_lengths: Any, label_lengths: Any, blank: int = 0,
             zero_infinity: bool = False) -> Op:
    """Each example's CTC negative log-likelihood ``-log p(labels | logits)``.

    Args:
        logits: ``[C, REC, N]`` (any order) unnormalized class scores per frame; the class
            axis ``C`` counts the blank.
        labels: ``[L, N]`` int class ids, padded; example ``n`` reads its first
            ``label_lengths[n]`` (none may be the blank). An op, or an int array of shape ``(L, N)``.
        input_lengths: ``[N]`` ints in ``[0, REC]``: the frames of each example.
        label_lengths: ``[N]`` ints in ``[0, L]``: the labels of each example.
        blank: the blank's class id, in ``[0, C)``.
        zero_infinity: give 0 (loss and gradient) for examples no alignment fits (too few
            frames for the labels, counting a blank between repeated labels) instead of
            ``inf`` loss and NaN gradient.

    Returns:
        an op ``[N]`` with the logits' float dtype.

    Raises:
        AxesError: logits without exactly a batch axis ``N``, a time axis ``REC`` and one
            class axis; labels or lengths whose axes do not fit; a blank out of range.
        DTypeError: non-float logits, non-integer labels or lengths.
        FeedError: (when run) lengths out of range, or labels out of range or equal to the blank.

    Example:
        >>> C, T, N, L = ng.make_axis(29, "C"), ng.make_axis(100, "REC"), ng.make_axis(8, "N"), ng.make_axis(20, "L")
        >>> logits = ng.placeholder([C, T, N]); labels = ng.placeholder([L, N], dtype="int32")
        >>> lengths, label_lengths = ng.placeholder([N], dtype="int32"), ng.placeholder([N], dtype="int32")
        >>> cost = ng.mean(ng.ctc_loss(logits, labels, lengths, label_lengths), out_axes=())
    """
    logits = as_op(logits, where="ctc_loss")
    roles = ctc_roles(logits.axes, "ctc_loss")
    if not isinstance(labels, Op):
        labels_array = np.asarray(labels)
        length = labels_array.shape[0] if labels_array.ndim == 2 else 0
        labels = _as_int_op(labels_array, [make_axis(length, "L"), roles.batch], "labels")
    input_lengths = _as_int_op(input_lengths, [roles.batch], "input_lengths")
    label_lengths = _as_int_op(label_lengths, [roles.batch], "label_lengths")
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)):
        raise DTypeError(f"ctc_loss: expected an int blank, received {blank!r}")
    if not isinstance(zero_infinity, bool):
        raise DTypeError(f"ctc_loss: expected zero_infinity to be a bool, received {zero_infinity!r}")
    return make(OpType.CTC, [logits, labels, input_lengths, label_lengths], arg=CTCArg(int(blank), zero_infinity))


def ctc_grad(logits: Op, labels: Op, input_lengths: Op, label_lengths: Op, blank: int = 0,
             zero_infinity: bool = False) -> Op:
    """``d sum_n ctc_loss[n] / d logits`` as one op (what the gradient rule builds; ops, not arrays).

    Returns:
        an op with the logits' axes: ``softmax(logits) - posteriors`` per frame, 0 beyond each
        example's ``input_lengths`` (NaN, or 0 with ``zero_infinity``, for impossible examples).

    Example:
        >>> g = ng.ctc_grad(logits, labels, lengths, label_lengths)  # == ng.deriv(ng.sum(loss), logits)
    """
    src = [as_op(x, where="ctc_grad") for x in (logits, labels, input_lengths, label_lengths)]
    return make(OpType.CTC_GRAD, src, arg=CTCArg(int(blank), bool(zero_infinity)))


__all__ = ["ctc_grad", "ctc_loss"]
