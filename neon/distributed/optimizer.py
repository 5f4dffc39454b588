"""``DistributedOptimizer``: any neon optimizer, with its gradients averaged across ranks first.

Horovod's design: the wrapper computes ``ng.gradients(cost, variables)``, wraps each gradient in
``ng.distributed.allreduce(g, op="mean")`` and hands the averaged gradients to the wrapped
optimizer's ``apply_gradients``. The reduction comes *before* clipping, weight decay and the
update rule, so a ``gradient_clip_norm`` sees the global norm of the averaged gradient and every
rank computes bit-for-bit the same step from the same averaged values. The compiler's bucketing
pass fuses the allreduces into buckets of about ``bucket_mb`` MiB and starts each as soon as its
gradients exist, overlapping communication with the rest of the backward pass.

Everything else is the wrapped optimizer's: its state variables and their checkpoint keys, its
config, learning-rate variables and schedule, its parameter groups. A checkpoint written with
the wrapper loads into a plain optimizer and back.

Example:
    >>> opt = DistributedOptimizer(Adam(1e-3 * distributed.size()))
    >>> model.fit(train, CrossEntropyMulti(), opt, num_epochs=5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ngraph_core as ng

from ..optimizers.base import cost_gradients
from ..optimizers.checks import OptimizerError

_OWN = frozenset({"optimizer", "bucket_mb", "average"})


class DistributedOptimizer:
    """Wrap ``optimizer`` so each step averages (or sums) the gradients over all ranks first.

    Args:
        optimizer: a neon optimizer (``GradientDescentMomentum``, ``Adam``, ``MultiOptimizer``...).
        bucket_mb: the size, in MiB, of the buckets the allreduces are fused into (larger: fewer,
            bigger messages; smaller: communication starts earlier in the backward pass).
        average: True: the mean over ranks (the gradient of the mean loss over the global batch);
            False: the sum.

    Attributes:
        optimizer: the wrapped optimizer; every attribute the wrapper lacks is read from (and
            written to) it: ``state_variables``, ``lr_variable``, ``learning_rates_at``, ``build``,
            ``get_config``, ``groups``...

    Raises:
        OptimizerError: ``optimizer`` without ``apply_gradients``, a ``bucket_mb`` that is not a
            finite number > 0, or a scalar-cost violation at call time.

    Example:
        >>> distributed.init()
        >>> opt = DistributedOptimizer(GradientDescentMomentum(0.1, momentum_coef=0.9), bucket_mb=25)
        >>> update = opt(cost, model.variables)      # the same op on every rank; run it and ranks stay equal
    """

    def __init__(self, optimizer: Any, bucket_mb: float = 25, average: bool = True) -> None:
        if isinstance(optimizer, DistributedOptimizer):
            raise OptimizerError("DistributedOptimizer: expected a neon optimizer, received a DistributedOptimizer; "
                                 "hint: wrap the optimizer once")
        if not callable(getattr(optimizer, "apply_gradients", None)):
            raise OptimizerError(f"DistributedOptimizer: expected a neon optimizer (with apply_gradients), received "
                                 f"{type(optimizer).__name__}; hint: GradientDescentMomentum(...), Adam(...)")
        ok = not isinstance(bucket_mb, bool) and isinstance(bucket_mb, (int, float)) and math.isfinite(bucket_mb)
        if not ok or bucket_mb <= 0:
            raise OptimizerError(f"DistributedOptimizer: expected bucket_mb to be a finite number > 0, received "
                                 f"{bucket_mb!r}")
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "bucket_mb", float(bucket_mb))
        object.__setattr__(self, "average", bool(average))

    # everything but the step itself is the wrapped optimizer's
    def __getattr__(self, name: str) -> Any:
        if name in _OWN:  # not yet set (during unpickling or a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.optimizer, name, value)

    def __call__(self, cost: ng.Op, variables: Sequence[ng.Op]) -> ng.Op:
        """One op performing one step: gradients, their allreduce across ranks, then the wrapped rule.

        Args:
            cost: this rank's scalar loss (the mean over its own batch).
            variables: candidate variables; only ``trainable``, non-``frozen`` ones are updated.

        Returns:
            an ``ng.doall`` of the assignments (evaluating ``cost`` when nothing is trainable).

        Raises:
            OptimizerError: a cost that is not a scalar op, items that are not variables.
        """
        found = cost_gradients(cost, variables, f"DistributedOptimizer({type(self.optimizer).__name__})")
        if found is None:
            return ng.doall([cost])
        grads, chosen = found
        reduced = self.reduce_gradients(grads)
        return self.optimizer.apply_gradients(list(zip(reduced, chosen, strict=True)), cost=cost)

    def reduce_gradients(self, grads: Sequence[ng.Op]) -> list[ng.Op]:
        """Each gradient wrapped in ``ng.distributed.allreduce`` (mean or sum over ranks), in order.

        Example:
            >>> reduced = opt.reduce_gradients(ng.gradients(cost, weights))
        """
        op = "mean" if self.average else "sum"
        bucket_bytes = int(self.bucket_mb * 2**20)
        return [ng.distributed.allreduce(g, op=op, bucket_bytes=bucket_bytes) for g in grads]

    def __repr__(self) -> str:
        return f"DistributedOptimizer({self.optimizer!r}, bucket_mb={self.bucket_mb:g}, average={self.average})"
