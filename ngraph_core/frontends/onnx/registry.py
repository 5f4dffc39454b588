"""The converter table: ONNX operator (domain, type, opset) -> the function that builds its ngraph ops.

A converter is registered for the opset version where the operator's current semantics
began (``since``); the importer picks, for a model's opset, the registration with the
greatest ``since`` not above it. So ``Softmax`` has one converter since 1 (coerce to 2-D)
and one since 13 (one axis), and a model at opset 11 gets the first.

A converter is called as ``fn(ctx, node, inputs)`` with the ``ImportContext``, the
``Node`` (its attributes parsed) and one value per ONNX input (``None`` for an omitted
optional input); it returns one value or a list of values, one per output it produces.

Example:
    >>> @converter("Relu", since=6)
    ... def relu(ctx, node, inputs):
    ...     return ng.relu(ctx.as_op(inputs[0]))
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

Converter = Callable[..., Any]

# (domain, op_type) -> sorted [(since, converter)]
CONVERTERS: dict[tuple[str, str], list[tuple[int, Converter]]] = {}

# the default domain's aliases ("ai.onnx" is the default domain spelled out)
_DOMAINS = {"ai.onnx": ""}


def converter(*op_types: str, since: int = 1, domain: str = "") -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of ``op_types`` from opset ``since`` on.

    Args:
        op_types: ONNX operator names (``"Add"``; several share one function).
        since: the first opset version these semantics apply to.
        domain: the operator's domain (``""``: the default ONNX domain).

    Example:
        >>> @converter("Add", "Sub", since=7)
        ... def arithmetic(ctx, node, inputs): ...
    """
    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            table = CONVERTERS.setdefault((_DOMAINS.get(domain, domain), op_type), [])
            if any(s == since for s, _ in table):
                raise ValueError(f"converter for {op_type} since opset {since} registered twice")
            bisect.insort(table, (since, fn), key=lambda entry: entry[0])
        return fn
    return register


def lookup(op_type: str, opset: int, domain: str = "") -> Converter | None:
    """The converter of ``op_type`` for a model at ``opset`` (None: unsupported at that opset)."""
    table = CONVERTERS.get((_DOMAINS.get(domain, domain), op_type), [])
    chosen = None
    for since, fn in table:
        if since <= opset:
            chosen = fn
    return chosen


def supported_ops(domain: str = "") -> list[str]:
    """The operator names with at least one converter in ``domain``, sorted."""
    domain = _DOMAINS.get(domain, domain)
    return sorted(op for d, op in CONVERTERS if d == domain)
