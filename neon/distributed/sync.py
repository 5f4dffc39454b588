"""Keeping ranks in agreement: one set of variables (``broadcast_variables``) and one set of numbers
(``average_metrics``, ``sum_across_ranks``).

``broadcast_variables`` copies the root rank's values into every rank's transformer, through the
communicator's in-place ``broadcast_`` on the values read with ``read_variable``: the variables of
one dtype are packed into one buffer, so a ResNet's hundred variables cost one MPI call, not a
hundred. ``Model.fit`` calls it at the start of a distributed run and after resuming from a
checkpoint, so weights, optimizer state (velocities, moments, the step count) and batch-norm
statistics start equal even when ranks initialised or loaded differently.

``average_metrics`` turns each rank's numbers into the sample-weighted mean over all ranks, so
every rank logs, checkpoints on and early-stops on the same values; ``sum_across_ranks`` sums raw
totals (``Model`` sums a metric's numerator and sample count before dividing, which is exact for
every metric, not only means).

Example:
    >>> broadcast_variables(model)                           # every rank now holds rank 0's weights
    >>> average_metrics({"valid_cost": 0.31}, weight=500)    # the same dict on every rank
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ngraph_core as ng

from .runtime import DistributedError, communicator, is_distributed


def model_variables(model_or_variables: Any) -> list[ng.Op]:
    """The variables to keep equal: a model's weights and its optimizer's state (its checkpoint keys),
    or the given variables, once each, in order.

    Raises:
        DistributedError: an item that is not a variable op.
    """
    if hasattr(model_or_variables, "checkpoint_keys"):
        params, opt = model_or_variables.checkpoint_keys()
        found = [*params.values(), *opt.values()]
    elif hasattr(model_or_variables, "variables"):
        found = list(model_or_variables.variables)
    else:
        found = list(model_or_variables)
    chosen: list[ng.Op] = []
    for var in found:
        if not isinstance(var, ng.Op) or var.op is not ng.OpType.VARIABLE:
            got = var.op.value if isinstance(var, ng.Op) else type(var).__name__
            raise DistributedError(f"broadcast_variables: expected a model or a list of variables, received an item "
                                   f"{got}; hint: pass model, or model.variables")
        if not any(var is c for c in chosen):
            chosen.append(var)
    return chosen


def broadcast_variables(model_or_variables: Any, transformer: Any = None, root: int = 0, comm: Any = None) -> int:
    """Set every rank's variables to ``root``'s values (weights, optimizer state, batch-norm statistics).

    Collective: every rank must call it, with the same variables in the same order (models built
    by the same code list them identically). A run of one rank returns at once.

    Args:
        model_or_variables: a ``Model`` (or any object with ``checkpoint_keys``: its weights and its
            bound optimizer's state), or a list of variable ops.
        transformer: the transformer holding the values (default: the model's ``transformer``).
        root: the rank whose values everyone takes.
        comm: a communicator (default: the current one).

    Returns:
        the number of variables broadcast.

    Raises:
        DistributedError: a root outside ``[0, size)``, no transformer for a list of variables, or
            ranks disagreeing on the variables' shapes (a model built differently on some rank).
        DistributedTimeoutError: another rank did not join within the timeout.

    Example:
        >>> model.load_params("out/last.h5")
        >>> broadcast_variables(model)            # rank 0's file wins, whatever the others read
    """
    comm = communicator(comm)
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < comm.size:
        raise DistributedError(f"broadcast_variables: expected root in [0, {comm.size}), received {root!r}")
    variables = model_variables(model_or_variables)
    if transformer is None:
        transformer = getattr(model_or_variables, "transformer", None)
        if transformer is None:
            raise DistributedError("broadcast_variables: a list of variables needs transformer=...; hint: pass the "
                                   "transformer that runs them, or the model")
    if comm.size == 1 or not variables:
        return len(variables)
    shapes = [[[a.length for a in v.axes], np.dtype(v.dtype).str] for v in variables]  # JSON-shaped
    if comm.allgather_object(shapes) != [shapes] * comm.size:
        raise DistributedError(f"broadcast_variables: the ranks hold different variables (rank {comm.rank}: "
                               f"{len(shapes)} variables); expected the same model on every rank; hint: build the "
                               "model with the same code and input shape everywhere before fit")
    values = [np.asarray(transformer.read_variable(v)) for v in variables]  # (not ascontiguousarray: keeps 0-d)
    for dtype in dict.fromkeys(a.dtype for a in values):  # one packed buffer per dtype: one MPI call each
        members = [i for i, a in enumerate(values) if a.dtype == dtype]
        packed = np.concatenate([values[i].ravel() for i in members])
        comm.broadcast_(packed, root=root)
        offset = 0
        for i in members:
            count = values[i].size
            transformer.write_variable(variables[i], packed[offset:offset + count].reshape(values[i].shape))
            offset += count
    return len(variables)


def sum_across_ranks(values: Sequence[float], comm: Any = None) -> list[float]:
    """The element-wise sum of ``values`` over all ranks (float64; the values themselves in one rank).

    Collective: every rank passes the same number of values.

    Example:
        >>> total, seen = sum_across_ranks([cost_total, samples])
    """
    buffer = np.asarray([float(v) for v in values], dtype=np.float64)
    comm = communicator(comm)
    if comm.size > 1:
        comm.allreduce_(buffer, op="sum")
    return [float(v) for v in buffer]


def average_metrics(values: Mapping[str, Any], weight: float = 1.0, comm: Any = None,
                    check_names: bool = True) -> dict[str, Any]:
    """The sample-weighted mean of each number in ``values`` over all ranks: the same dict on every rank.

    ``sum_r(weight_r * value_r) / sum_r(weight_r)``, with ``weight`` the number of samples the
    rank's values were averaged over; values that are not numbers (None, text) pass through.
    Outside a distributed run (or with one rank) it returns a copy of ``values``.

    Args:
        values: name -> this rank's value.
        weight: how many samples this rank's values cover (> 0 on at least one rank).
        comm: a communicator (default: the current one; only used in a distributed run).
        check_names: first check that every rank passes the same names (one more collective);
            ``fit`` skips it for the values of every step, which one step function makes alike.

    Returns:
        name -> the mean over all ranks.

    Raises:
        DistributedError: ranks with different names, a negative or non-finite weight, or weights
            summing to zero.

    Example:
        >>> average_metrics({"valid_accuracy": 0.9}, weight=500)   # rank 1 passed 0.8, weight 500
        {'valid_accuracy': 0.85}
    """
    if comm is None and not is_distributed():
        return dict(values)
    comm = communicator(comm)
    if comm.size == 1:
        return dict(values)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
        raise DistributedError(f"average_metrics: expected weight to be a finite number >= 0 (samples), "
                               f"received {weight!r}")
    names = [k for k, v in values.items() if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]
    every = comm.allgather_object(names) if check_names else [names]
    if any(other != names for other in every):
        raise DistributedError(f"average_metrics: expected the same names on every rank, received {every}; hint: "
                               "every rank must evaluate the same metrics")
    totals = sum_across_ranks([*(float(values[k]) * weight for k in names), float(weight)], comm)
    if totals[-1] <= 0:
        raise DistributedError("average_metrics: the weights sum to 0 over all ranks; expected at least one sample")
    return {**values, **{k: total / totals[-1] for k, total in zip(names, totals[:-1], strict=True)}}
