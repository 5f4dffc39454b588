"""Metrics: quantities reported during evaluation, built as ngraph ops.

``metric(y_hat, y)`` returns a scalar op: the SUM over the batch of a per-sample value.
``Model.eval`` adds these sums over the batches and calls ``metric.aggregate(total,
n_samples)`` (default ``total / n_samples``), so a partial last batch counts exactly its
samples. Targets are matched to the predictions as for costs (``neon.costs.match_targets``);
a length mismatch raises ``MetricError``.

Example:
    >>> acc = Accuracy()
    >>> correct = acc(y_hat, y)          # op: number of correct samples in the batch
    >>> acc.aggregate([31.0, 29.0], 64)  # host side, after running the batches
    0.9375
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import ngraph_core as ng

from .costs import match_targets


class MetricError(ng.NgraphError, ValueError):
    """A metric was given a configuration, or targets, it cannot handle."""


def _classes(x: ng.Op) -> ng.Op:
    """``x`` with one non-batch axis (several are flattened into one)."""
    rest = [a for a in x.axes if not a.is_batch]
    return ng.flatten(x, rest) if len(rest) > 1 else x


def _is_binary(y_hat: ng.Op) -> bool:
    """One output unit per sample: a probability, thresholded at 0.5."""
    return y_hat.axes.size == y_hat.axes.batch_axis.length


class Metric:
    """Base class: ``metric(y_hat, y)`` is the batch sum of ``per_sample(y_hat, y)``.

    Subclasses implement ``per_sample(y_hat, y) -> [N]`` (``y`` already matched to
    ``y_hat``) and set ``name``.

    Attributes:
        name: the key Model.eval and the callbacks report it under.

    Example:
        >>> class MeanAbsError(Metric):
        ...     name = "mean_abs_error"
        ...     def per_sample(self, y_hat, y):
        ...         return ng.mean(ng.abs(y_hat - y), out_axes=[y_hat.axes.batch_axis])
    """

    name = "metric"

    def __call__(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        kind = type(self).__name__
        with ng.name_scope(kind, kind=kind):
            y = match_targets(y_hat, y, kind, MetricError)
            return ng.sum(self.per_sample(y_hat, y))

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        """The metric of each sample, with axes ``[N]``."""
        raise NotImplementedError(f"{type(self).__name__} must implement per_sample(y_hat, y)")

    def aggregate(self, sums: float | Iterable[float], n_samples: int) -> float:
        """The dataset's metric from the batch sums (one total, or one sum per batch).

        Args:
            sums: the values ``metric(y_hat, y)`` took, or their total.
            n_samples: the number of samples they cover.

        Returns:
            ``sum(sums) / n_samples``.

        Raises:
            MetricError: ``n_samples`` not positive.
        """
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples <= 0:
            raise MetricError(f"{type(self).__name__}.aggregate: expected a positive sample count, "
                              f"received {n_samples!r}")
        total = float(sums) if not isinstance(sums, Iterable) else float(sum(float(s) for s in sums))
        return total / n_samples

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments as plain data."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Metric:
        """A new metric from ``get_config()``'s output."""
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _correct(y_hat: ng.Op, y: ng.Op) -> ng.Op:
    """1.0 where the predicted class is the target class, per sample ``[N]``."""
    batch = y_hat.axes.batch_axis
    if _is_binary(y_hat):
        hit = ng.equal(ng.greater(y_hat, 0.5), ng.greater(y, 0.5))
        return ng.sum(hit, out_axes=[batch])
    y_hat, y = _classes(y_hat), _classes(y)
    return ng.cast(ng.equal(ng.argmax(y_hat, out_axes=[batch]), ng.argmax(y, out_axes=[batch])), y_hat.dtype)


class Accuracy(Metric):
    """Fraction of samples whose predicted class is the target class.

    Per sample: ``argmax_k y_hat[k, n] == argmax_k y[k, n]`` (ties go to the first class);
    for a single output unit (binary), ``(y_hat > 0.5) == (y > 0.5)``.

    Example:
        >>> Accuracy()(y_hat, y)  # number of correct samples in the batch
    """

    name = "accuracy"

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        return _correct(y_hat, y)


class Misclassification(Metric):
    """Fraction of samples whose predicted class is not the target class (``1 - Accuracy``).

    Example:
        >>> Misclassification()(y_hat, y)  # number of misclassified samples in the batch
    """

    name = "misclassification"

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        return 1.0 - _correct(y_hat, y)


class TopKMisclassification(Metric):
    """Fraction of samples whose target class is not among the ``k`` highest predictions.

    Per sample, with ``p = sum_k y[k] * y_hat[k]`` the target's score (``y`` one-hot),
    ``g`` the number of classes scoring above ``p`` and ``e`` the number scoring exactly
    ``p`` (the target included), the free slots are ``s = k - g`` and

        miss = 1                 if s <= 0
               0                 if e <= s
               1 - s / e         otherwise (ties broken at random, as neon)

    Args:
        k: the number of guesses allowed (>= 1).

    Raises:
        MetricError: k not a positive int.

    Example:
        >>> TopKMisclassification(5)(y_hat, y)
    """

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise MetricError(f"TopKMisclassification: expected k to be an int >= 1, received {k!r}")
        self.k = k
        self.name = f"top{k}_misclassification"

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        y_hat, y = _classes(y_hat), _classes(y)
        batch = [y_hat.axes.batch_axis]
        p_true = ng.sum(y_hat * y, out_axes=batch)
        above = ng.sum(ng.greater(y_hat, p_true), out_axes=batch)
        tied = ng.maximum(ng.sum(ng.equal(y_hat, p_true), out_axes=batch), 1.0)
        slots = float(self.k) - above
        hit = ng.where(ng.less_equal(slots, 0.0), 0.0, ng.where(ng.less_equal(tied, slots), 1.0, slots / tied))
        return 1.0 - hit

    def get_config(self) -> dict[str, Any]:
        return {"k": self.k}


class LogLoss(Metric):
    """Mean negative log-likelihood of the targets: per sample ``-sum_k y[k] * log(y_hat[k])``.

    For one-hot targets this is ``-log(y_hat[target])``. It is computed like
    ``CrossEntropyMulti`` (from the logits when ``y_hat`` is a softmax output, so it stays
    finite); a single output unit uses the binary form ``-[y log y_hat + (1-y) log(1-y_hat)]``.

    Example:
        >>> LogLoss()(y_hat, y)  # batch sum of the per-sample log loss
    """

    name = "log_loss"

    def __call__(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        # the cross-entropy helpers see y_hat itself (not a reshaped copy), so they find softmax logits
        with ng.name_scope("LogLoss", kind="LogLoss"):
            y = match_targets(y_hat, y, "LogLoss", MetricError)
            return ng.cross_entropy_binary(y_hat, y) if _is_binary(y_hat) else ng.cross_entropy_multi(y_hat, y)

    def per_sample(self, y_hat: ng.Op, y: ng.Op) -> ng.Op:
        batch = [y_hat.axes.batch_axis]
        if _is_binary(y_hat):
            return ng.cross_entropy_binary(y_hat, y, out_axes=batch)
        return ng.cross_entropy_multi(y_hat, y, out_axes=batch)


def edit_distance(ref: Sequence[Any], hyp: Sequence[Any]) -> int:
    """Levenshtein distance: the fewest substitutions, insertions and deletions turning ``ref`` into ``hyp``.

    Example:
        >>> edit_distance("kitten", "sitting")
        3
    """
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        diagonal, row[0] = row[0], i
        for j, h in enumerate(hyp, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (r != h))
    return row[-1]


class _ErrorRate:
    """Corpus-level edit-distance rate on the host: ``sum(edits) / sum(len(reference))`` over all pairs.

    Unlike the graph metrics above it compares decoded sequences (``neon.decoders``), which have
    no fixed shape, so it is called with Python sequences, not ops.
    """

    name, unit_name = "error_rate", "units"

    def units(self, text: Any) -> Sequence[Any]:
        """The units distances count: characters (CER) or words (WER)."""
        raise NotImplementedError

    def __call__(self, refs: Sequence[Any], hyps: Sequence[Any]) -> float:
        kind = type(self).__name__
        if isinstance(refs, str) or isinstance(hyps, str):
            raise MetricError(f"{kind}: expected lists of references and hypotheses, received a single string; "
                              f"hint: {kind}()([reference], [hypothesis])")
        refs, hyps = list(refs), list(hyps)
        if len(refs) != len(hyps):
            raise MetricError(f"{kind}: expected one hypothesis per reference, received {len(refs)} references "
                              f"and {len(hyps)} hypotheses")
        pairs = [(self.units(r), self.units(h)) for r, h in zip(refs, hyps)]
        total = sum(len(r) for r, _ in pairs)
        if total == 0:
            raise MetricError(f"{kind}: the references hold no {self.unit_name}; expected at least one")
        return sum(edit_distance(r, h) for r, h in pairs) / total

    def get_config(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class CER(_ErrorRate):
    """Character error rate: character edits over reference characters, over the whole corpus.

    Strings are compared character by character; sequences of label ids (a decoder's output)
    element by element.

    Raises:
        MetricError: unequal numbers of references and hypotheses, or empty references.

    Example:
        >>> CER()(["hello world"], ["hallo word"])  # 2 edits / 11 characters
        0.18181818181818182
    """

    name, unit_name = "cer", "characters"

    def units(self, text: Any) -> Sequence[Any]:
        return text if isinstance(text, str) else list(text)


class WER(_ErrorRate):
    """Word error rate: word edits over reference words (split on whitespace), over the whole corpus.

    Raises:
        MetricError: unequal numbers of references and hypotheses, non-string items, or no
            reference words.

    Example:
        >>> WER()(["the cat sat"], ["the cat sat down"])  # 1 insertion / 3 words
        0.3333333333333333
    """

    name, unit_name = "wer", "words"

    def units(self, text: Any) -> Sequence[Any]:
        if not isinstance(text, str):
            raise MetricError(f"WER: expected strings, received {type(text).__name__}; hint: join decoded labels "
                              "into text first")
        return text.split()


__all__ = ["CER", "WER", "Accuracy", "LogLoss", "Metric", "MetricError", "Misclassification",
           "TopKMisclassification", "edit_distance"]
