"""Sub-graphs as values: ``Graph(params, roots)``, carried in an op's ``arg``.

A ``Graph`` is a function written in ops: ``params`` are placeholders standing for its
inputs, ``roots`` its results. An op carries one in its ``arg`` (``call`` today; ``scan``
and ONNX ``Loop`` bodies next), and everything that walks a graph descends into it:
``walk`` (the ops of a graph and of all its sub-graphs, sub-graphs first), ``verify``,
``serialize``/``deserialize``, and the executor, which compiles a sub-graph once per
computation and runs it as often as the op runs.

A ``Graph`` is hashable by the identity of its ops (ops are hash-consed, so equal
structure is equal), which is what an ``arg`` must be.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import GraphError
from .codec import CodecContext, check_keys, check_type, fail, wrong_arg
from .node import Op, toposort
from .ops import OpType


@dataclass(frozen=True, slots=True)
class Graph:
    """A sub-graph: ``params`` (placeholders, its inputs, in order) and ``roots`` (its results).

    Args:
        params: distinct placeholders; every placeholder the roots reach must be among them.
        roots: the results.

    Raises:
        GraphError: a param that is not a placeholder, a repeated param, or a root that
            reaches a placeholder not among the params.

    Example:
        >>> x = ng.placeholder([C]); body = Graph((x,), (ng.tanh(x) * 2,))
        >>> y = ng.call(body, v)   # tanh(v) * 2, computed by a compiled sub-plan
    """

    params: tuple[Op, ...]
    roots: tuple[Op, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "roots", tuple(self.roots))
        if not self.roots or not all(isinstance(r, Op) for r in self.roots):
            raise GraphError(f"Graph: expected one or more result ops, received {self.roots!r}")
        for p in self.params:
            if not isinstance(p, Op) or p.op is not OpType.PLACEHOLDER:
                got = p.op.value if isinstance(p, Op) else type(p).__name__
                raise GraphError(f"Graph: expected placeholders as params, received {got}; "
                                 "hint: make each input with ng.placeholder")
        if len(set(self.params)) != len(self.params):
            raise GraphError("Graph: a placeholder is listed twice among the params")
        free = [op for op in toposort(self.roots) if op.op is OpType.PLACEHOLDER and op not in self.params]
        if free:
            raise GraphError(
                f"Graph: the roots read placeholder(s) {', '.join(p.name for p in free)} that are not params; "
                "hint: list every input of the sub-graph in params"
            )

    @property
    def order(self) -> list[Op]:
        """The sub-graph's ops, sources first."""
        return toposort(self.roots)

    def __repr__(self) -> str:
        return f"graph({len(self.params)} params -> {len(self.roots)} results, {len(self.order)} ops)"


@dataclass(frozen=True, slots=True)
class CallArg:
    """``arg`` of a ``call`` op: the sub-graph and which of its results the op is."""

    graph: Graph
    index: int = 0

    @property
    def graphs(self) -> tuple[Graph, ...]:
        return (self.graph,)

    def __repr__(self) -> str:
        return f"{self.graph!r}[{self.index}]"

    # -- as an op's arg (the protocol of ir/args.py) ------------------------------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a CallArg, else None (the sub-graph is checked by inference)."""
        return None if isinstance(op.arg, CallArg) else wrong_arg(op, "a CallArg (sub-graph and result index)")

    @staticmethod
    def to_json(op: Op, ctx: CodecContext) -> dict:
        """``{"index", "params": [op ids], "roots": [op ids]}``: the sub-graph's ops are earlier
        records of the same document (``ctx.index``)."""
        graph = op.arg.graph
        return {"index": op.arg.index, "params": [ctx.index[p] for p in graph.params],
                "roots": [ctx.index[r] for r in graph.roots]}

    @staticmethod
    def from_json(data: Any, ctx: CodecContext, where: str) -> CallArg:
        """The CallArg ``to_json`` wrote, its ops taken from ``ctx.built``.

        Raises:
            SerializationError: bad keys, or ids that are not earlier ops of the document.
        """
        check_keys(data, ("index", "params", "roots"), where)
        index = check_type(data["index"], int, where, "an int result index")
        return CallArg(decode_graph(data, ctx, where), index)


def decode_graph(data: dict, ctx: CodecContext, where: str) -> Graph:
    """The ``Graph`` whose param and root ids ``data["params"]`` / ``data["roots"]`` name, from ``ctx.built``.

    Raises:
        SerializationError: ids that are not earlier ops of the document.
    """
    n = len(ctx.built)
    refs = {}
    for key in ("params", "roots"):
        items = check_type(data[key], list, where, f"{key} as a list of op ids")
        if not all(type(i) is int and 0 <= i < n for i in items):
            raise fail(where, f"{key} ids of earlier ops (0 <= id < {n})", items,
                       "hint: a sub-graph's ops come before the op that carries it")
        refs[key] = tuple(ctx.built[i] for i in items)
    return Graph(refs["params"], refs["roots"])


def subgraphs(op: Op) -> tuple[Graph, ...]:
    """The sub-graphs ``op`` carries in its arg (none for most ops)."""
    arg: Any = op.arg
    if isinstance(arg, Graph):
        return (arg,)
    return tuple(getattr(arg, "graphs", ()))


def walk(roots: Iterable[Op]) -> list[Op]:
    """Every op below ``roots`` and inside their sub-graphs (at any depth), each after its sources
    and every sub-graph's ops before the op that carries it."""
    out: list[Op] = []
    seen: set[Op] = set()

    def visit(ops: Iterable[Op]) -> None:
        for op in toposort(ops):
            if op in seen:
                continue
            for graph in subgraphs(op):
                visit(graph.roots)
            seen.add(op)
            out.append(op)

    visit(list(roots))
    return out
