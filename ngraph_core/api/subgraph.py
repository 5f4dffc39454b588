"""Sub-graphs as functions: ``ng.graph(params, roots)`` and ``ng.call(graph, *inputs)``.

A sub-graph is written once with placeholders for its inputs and applied with ``call``;
the executor compiles it once per transformer and runs it each time the ``call`` runs, so
graph size does not grow with the number of applications. ``scan`` (recurrent layers)
builds on the same ``Graph`` value.

Gradients flow to a ``call``'s inputs (the rule differentiates the sub-graph with the
inputs substituted). Variables the sub-graph reads directly are not inputs of the ``call``
op and get no gradient through it: pass trainable values in as inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir import CallArg, Graph, Op, OpType, make
from .tensors import as_op


def graph(params: Sequence[Op], roots: Op | Sequence[Op]) -> Graph:
    """A sub-graph value: ``params`` (placeholders, its inputs in order) and ``roots`` (its results).

    Raises:
        GraphError: a param that is not a placeholder, or a result reading a placeholder not in params.

    Example:
        >>> p = ng.placeholder([C]); body = ng.graph([p], ng.tanh(p) * 2.0)
    """
    return Graph(tuple(params), (roots,) if isinstance(roots, Op) else tuple(roots))


def call(body: Graph, *inputs: Any) -> Op | list[Op]:
    """Apply ``body`` to ``inputs``: one op per result of the sub-graph (a single op for one result).

    Each input must have the axes (in order) and dtype of its param.

    Raises:
        AxesError: a wrong number of inputs, or an input whose axes or dtype differ from its param's.

    Example:
        >>> y = ng.call(body, x)          # tanh(x) * 2
    """
    src = [as_op(x, where="call") for x in inputs]
    outs = [make(OpType.CALL, src, CallArg(body, i)) for i in range(len(body.roots))]
    return outs[0] if len(outs) == 1 else outs
