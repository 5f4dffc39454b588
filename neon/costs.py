"""Costs: the scalar a training step minimises, built as ngraph ops.

A cost is called as ``cost(y_hat, y)`` with the model's output ``y_hat`` (e.g. ``[Out, N]``,
the batch axis ``N`` last) and the targets ``y`` fed by the dataset (``[Y, N]`` one-hot,
or ``[N]`` for a binary output). It returns a scalar op (axes ``()``): the MEAN over the
batch of a per-sample cost, so the learning rate does not depend on the batch size.

Targets are matched to the predictions first (``match_targets``): the dataset names its
target axis differently from the last layer's output axis, so when the non-batch lengths
agree the targets are renamed (``ng.cast_axes``) onto the prediction's axes; when they
differ a ``CostError`` says what was expected.

Example:
    >>> cost = CrossEntropyMulti()(y_hat, y)  # y_hat = softmax output [Out:10, N], y [Y:10, N]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import ngraph_core as ng


class CostError(ng.NgraphError, ValueError):
    """A cost was given a configuration, or targets, it cannot handle."""


def _lengths(axes: Any) -> tuple[int, ...]:
    return tuple(a.length for a in axes if not a.is_batch)


def match_targets(y_hat: ng.Op, y: ng.Op, who: str, error: type[Exception] = CostError) -> ng.Op:
    """``y`` renamed onto ``y_hat``'s axes (and cast to its dtype), ready for element-wise math.

    * axes of the same names as ``y_hat``'s: kept;
    * the same non-batch lengths (``[Y:10, N]`` vs ``[Out:10, N]``): renamed position by
      position with ``ng.cast_axes``;
    * the same lengths once length-1 axes are ignored (``[N]`` vs ``[Out:1, N]``): squeezed,
      renamed and broadcast to ``y_hat``'s axes;
    * integer class ids ``[N]`` against one class axis ``[Out:K, N]``: one-hot encoded.

    Args:
        y_hat: predictions with a batch axis ``N``.
        y: targets.
        who: the cost or metric, named in errors.
        error: the exception class to raise.

    Returns:
        the targets with ``y_hat``'s axes (or a subset of them) and dtype.

    Raises:
        error: no batch axis, a batch length or non-batch lengths that differ.

    Example:
        >>> t = match_targets(y_hat, y, "Accuracy")  # y [Y:10, N] -> [Out:10, N]
    """
    for what, x in (("predictions", y_hat), ("targets", y)):
        if not isinstance(x, ng.Op):
            raise error(f"{who}: expected {what} as an ngraph op, received {type(x).__name__}; "
                        "hint: call the cost on the model's output op and a target placeholder")
    batch = y_hat.axes.batch_axis
    if batch is None:
        raise error(f"{who}: predictions {y_hat.axes} have no batch axis; hint: name the batch axis 'N'")
    y_batch = y.axes.batch_axis
    if y_batch is None or y_batch.length != batch.length:
        got = "no batch axis" if y_batch is None else f"batch length {y_batch.length}"
        raise error(f"{who}: expected targets with a batch axis N of length {batch.length}, received {got} "
                    f"(targets {y.axes}); hint: feed targets with the same batch size as the inputs")
    if y.axes.same_set(y_hat.axes):
        matched = y
    elif not y.dtype.startswith("float") and not _lengths(y.axes) and len(_lengths(y_hat.axes)) == 1 \
            and _lengths(y_hat.axes)[0] > 1:
        classes = next(a for a in y_hat.axes if not a.is_batch)
        matched = ng.one_hot(ng.cast_axes(y, [batch]), classes)
    elif _lengths(y.axes) == _lengths(y_hat.axes):
        rest = iter(a for a in y_hat.axes if not a.is_batch)
        matched = ng.cast_axes(y, [batch if a.is_batch else next(rest) for a in y.axes])
    elif tuple(n for n in _lengths(y.axes) if n != 1) == tuple(n for n in _lengths(y_hat.axes) if n != 1):
        ones = [a for a in y.axes if a.length == 1 and not a.is_batch]
        squeezed = ng.sum(y, reduction_axes=ones) if ones else y
        rest = iter(a for a in y_hat.axes if a.length != 1 and not a.is_batch)
        renamed = ng.cast_axes(squeezed, [batch if a.is_batch else next(rest) for a in squeezed.axes])
        matched = ng.broadcast(renamed, y_hat.axes)
    else:
        raise error(
            f"{who}: expected targets with lengths {_lengths(y_hat.axes)} besides the batch axis "
            f"(predictions {y_hat.axes}), received {_lengths(y.axes)} (targets {y.axes}); "
            "hint: the dataset's nclass must equal the last layer's nout"
        )
    return matched if matched.dtype == y_hat.dtype else ng.cast(matched, y_hat.dtype)


class Cost:
    """Base class of costs: ``cost(y_hat, y)`` -> the mean over the batch of the per-sample cost.

    Subclasses implement ``total(y_hat, y)``: the SUM over the batch (and the non-batch
    axes) of the per-element cost, with ``y`` already matched to ``y_hat``. The base
    matches the targets, builds the ops in a scope named after the cost, and divides by
    the batch size.

    Example:
        >>> class AbsError(Cost):
        ...     def total(self, y_hat, y):
        ...         return ng.sum(ng.abs(y_hat - y))
    """

    def __call__(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        name = type(self).__name__
        with ng.name_scope(name, kind=name):
            y = match_targets(y_hat, y, name, CostError)
            return self.total(y_hat, y) / float(y_hat.axes.batch_axis.length)

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        """The cost summed over every axis (batch included); ``y`` has ``y_hat``'s axes."""
        raise NotImplementedError(f"{type(self).__name__} must implement total(y_hat, y)")

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data; ``type(cost)(**config)`` rebuilds it."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Cost:
        """A new cost from ``get_config()``'s output."""
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class CrossEntropyMulti(Cost):
    """Multi-class cross-entropy: ``mean_n( -sum_k y[k, n] * log(y_hat[k, n]) )``.

    ``y`` is one-hot (or a probability distribution) over the class axis. When ``y_hat``
    is a softmax output, ``log(y_hat)`` is computed as the log-softmax of its logits
    (``ng.cross_entropy_multi``), so the cost stays finite for any logits; otherwise
    ``log(max(y_hat, 1e-30))``.

    Args:
        usebits: report the cost in bits (divide by ``log(2)``), as neon's ``usebits``.

    Example:
        >>> cost = CrossEntropyMulti()(softmax_output, one_hot_targets)
    """

    def __init__(self, usebits: bool = False) -> None:
        if not isinstance(usebits, bool):
            raise CostError(f"CrossEntropyMulti: expected usebits to be a bool, received {usebits!r}")
        self.usebits = usebits

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        total = ng.cross_entropy_multi(y_hat, y)
        return total / math.log(2.0) if self.usebits else total

    def get_config(self) -> dict[str, Any]:
        return {"usebits": self.usebits}


class CrossEntropyBinary(Cost):
    """Binary cross-entropy: ``mean_n( -sum_k [y log(y_hat) + (1 - y) log(1 - y_hat)] )``.

    ``y_hat`` holds probabilities (``[Out:1, N]`` or one probability per output unit) and
    ``y`` 0/1 targets (``[N]`` or matching ``y_hat``). When ``y_hat`` is a sigmoid output
    the cost is computed from its logits ``z`` as ``softplus(z) - y*z``
    (``ng.cross_entropy_binary``), finite for any ``z``; otherwise the logs are clipped at 1e-30.

    Example:
        >>> cost = CrossEntropyBinary()(sigmoid_output, targets)
    """

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        return ng.cross_entropy_binary(y_hat, y)


class SumSquared(Cost):
    """Half the summed squared error, as in neon: ``mean_n( 0.5 * sum_k (y_hat[k, n] - y[k, n])**2 )``.

    Example:
        >>> cost = SumSquared()(y_hat, y)
    """

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        return 0.5 * ng.sum(ng.square(y_hat - y))


class MeanSquared(Cost):
    """Half the mean squared error, as in neon: ``mean_n( 0.5 * mean_k (y_hat[k, n] - y[k, n])**2 )``.

    This is half of PyTorch's ``MSELoss()`` (which has no factor 0.5).

    Example:
        >>> cost = MeanSquared()(y_hat, y)
    """

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        features = max(y_hat.axes.size // y_hat.axes.batch_axis.length, 1)
        return ng.sum(ng.square(y_hat - y)) * (0.5 / features)


class SmoothL1(Cost):
    """Smooth L1 (Huber-like) cost of Fast R-CNN: ``mean_n( sum_k f(y_hat[k, n] - y[k, n]) )`` with

    ``f(x) = 0.5 * sigma**2 * x**2`` where ``|x| < 1 / sigma**2``, else ``|x| - 0.5 / sigma**2``.

    This is neon's ``SmoothL1Loss(sigma)``, and PyTorch's ``SmoothL1Loss(beta=1/sigma**2,
    reduction="sum")`` divided by the batch size.

    Args:
        sigma: positive; larger sigma narrows the quadratic zone around 0.

    Raises:
        CostError: sigma not a positive finite number.

    Example:
        >>> cost = SmoothL1(sigma=3.0)(box_deltas, target_deltas)
    """

    def __init__(self, sigma: float = 1.0) -> None:
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not math.isfinite(sigma) or sigma <= 0:
            raise CostError(f"SmoothL1: expected sigma to be a positive finite number, received {sigma!r}")
        self.sigma = float(sigma)

    def total(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        s2 = self.sigma ** 2
        x = y_hat - y
        ax = ng.absolute(x)
        per_element = ng.where(ng.less(ax, 1.0 / s2), (0.5 * s2) * ng.square(x), ax - 0.5 / s2)
        return ng.sum(per_element)

    def get_config(self) -> dict[str, Any]:
        return {"sigma": self.sigma}


def pack_ctc_targets(labels: Sequence[Sequence[int]], input_lengths: Sequence[int],
                     max_label_length: int | None = None) -> np.ndarray:
    """The ``CTC`` cost's targets, one row per sample: ``[input_length, label_length, *labels, 0...]``.

    Args:
        labels: one sequence of class ids per sample (the blank never among them).
        input_lengths: the valid frames of each sample's *model output* (``REC`` of ``y_hat``).
        max_label_length: ``L``, the padded label length (default: the longest).

    Returns:
        an int32 array ``(ndata, 2 + L)``; ``ArrayIterator(X, y=packed)`` yields ``[2 + L, N]`` batches.

    Raises:
        CostError: unequal counts, negative lengths, or a label sequence longer than ``L``.

    Example:
        >>> y = pack_ctc_targets([[3, 1], [2, 2, 5]], [50, 42])  # [[50, 2, 3, 1, 0], [42, 3, 2, 2, 5]]
    """
    labels = [list(seq) for seq in labels]
    if len(labels) != len(input_lengths):
        raise CostError(f"pack_ctc_targets: expected one input length per label sequence, received {len(labels)} "
                        f"sequences and {len(input_lengths)} lengths")
    longest = max((len(seq) for seq in labels), default=0)
    width = longest if max_label_length is None else int(max_label_length)
    if longest > width or any(int(n) < 0 for n in input_lengths):
        raise CostError(f"pack_ctc_targets: expected label sequences of at most {width} and input lengths >= 0, "
                        f"received a sequence of {longest}; hint: raise max_label_length")
    packed = np.zeros((len(labels), 2 + width), dtype=np.int32)
    for i, (seq, frames) in enumerate(zip(labels, input_lengths)):
        packed[i, :2 + len(seq)] = [int(frames), len(seq), *seq]
    return packed


class CTC(Cost):
    """Connectionist temporal classification: ``mean_n( -log p(labels_n | y_hat_n) )`` (``ng.ctc_loss``).

    ``y_hat`` is the model's output ``[C, REC, N]`` (classes with the blank, time, batch) and
    ``y`` the packed targets ``[P, N]`` of ``pack_ctc_targets``: per sample, row 0 is the
    number of valid output frames, row 1 the label count, rows ``2:`` the labels padded to
    ``L = P - 2`` (int, or float holding ints, as ``ArrayIterator`` feeds them). Like neon and
    PyTorch's ``reduction="sum"`` divided by the batch, the cost is the mean over samples of
    their summed negative log-likelihood (not divided by label lengths).

    Args:
        blank: the blank's class id.
        inputs: ``"logits"`` (default; the last layer has no softmax, ``ng.ctc_loss`` normalizes)
            or ``"probs"`` (a softmax output: its log is used).
        zero_infinity: samples no alignment fits cost 0 instead of ``inf`` (see ``ng.ctc_loss``).

    Raises:
        CostError: bad settings; targets without the ``[2 + L, N]`` form.

    Example:
        >>> cost = CTC(blank=0)(logits, y)  # logits [C:29, REC:200, N], y [P:42, N]
    """

    def __init__(self, blank: int = 0, inputs: str = "logits", zero_infinity: bool = False) -> None:
        if isinstance(blank, bool) or not isinstance(blank, int) or blank < 0:
            raise CostError(f"CTC: expected blank to be an int >= 0, received {blank!r}")
        if inputs not in ("logits", "probs"):
            raise CostError(f"CTC: expected inputs='logits' or 'probs', received {inputs!r}")
        if not isinstance(zero_infinity, bool):
            raise CostError(f"CTC: expected zero_infinity to be a bool, received {zero_infinity!r}")
        self.blank, self.inputs, self.zero_infinity = blank, inputs, zero_infinity

    def __call__(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        with ng.name_scope("CTC", kind="CTC"):
            return ng.sum(self.per_sample(y_hat, y)) / float(y_hat.axes.batch_axis.length)

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        """Each sample's negative log-likelihood ``[N]``."""
        rest = [a for a in y.axes if not a.is_batch] if isinstance(y, ng.Op) else []
        if len(rest) != 1 or rest[0].length < 2 or y.axes.batch_axis is None:
            got = y.axes if isinstance(y, ng.Op) else type(y).__name__
            raise CostError(f"CTC: expected packed targets [2 + L, N] (frames, label count, labels), received {got}; "
                            "hint: y = pack_ctc_targets(labels, input_lengths)")
        packed = y if y.dtype.startswith("int") else ng.cast(y, "int32")
        lengths = [ng.slice_along_axis(packed, rest[0], i) for i in (0, 1)]
        labels = ng.slice_along_axis(packed, rest[0], slice(2, None))
        logits = ng.log(ng.maximum(y_hat, 1e-30)) if self.inputs == "probs" else y_hat
        return ng.ctc_loss(logits, labels, *lengths, blank=self.blank, zero_infinity=self.zero_infinity)

    def target_placeholder(self, y_hat: ng.Op, y_shape: tuple[int, ...], n: int) -> ng.Op:
        """The placeholder for packed targets of ``y_shape == (2 + L,)`` per sample (a hook for ``Model``)."""
        if len(y_shape) != 1 or y_shape[0] < 2:
            raise CostError(f"CTC: expected packed targets of shape (2 + L,) per sample, received {y_shape}; "
                            "hint: y = pack_ctc_targets(labels, input_lengths)")
        return ng.placeholder([ng.make_axis(y_shape[0], "P"), ng.make_axis(n, "N")], name="Y")

    def get_config(self) -> dict[str, Any]:
        return {"blank": self.blank, "inputs": self.inputs, "zero_infinity": self.zero_infinity}


__all__ = ["CTC", "Cost", "CostError", "CrossEntropyBinary", "CrossEntropyMulti", "MeanSquared", "SmoothL1",
           "SumSquared", "match_targets", "pack_ctc_targets"]
