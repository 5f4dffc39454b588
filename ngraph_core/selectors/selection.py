"""``select(source, query)`` and what it returns: a ``Selection`` of ops and layer scopes that can be
read (``names``, ``ops``, ``variables``) and acted on (``set``, ``freeze``, ``tap``, ``replace``).

Every mutation goes through ``ng.update_meta`` (the one gate for metadata), so computations
compiled before it recompile at their next call. ``.tap`` stores its callables under the meta
attribute ``TAP_ATTR``; transformers compute tapped ops as hidden extra results and call the
taps after each run, and ``serialize`` skips the attribute (a callable is not data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AxesError, DTypeError, SelectorError
from ..ir import Graph, Op, OpType, ScopeEntry, format_axes, rebuild, toposort, update_meta, walk
from .checks import check_layer_types
from .match import Evaluator, GraphIndex, Path, ScopeAttrs, path_text
from .parser import parse

TAP_ATTR = "tap"  # meta attribute holding a tuple of tap callables (runtime only: never serialized)

Tap = Callable[[str, Any], Any]


@dataclass(frozen=True)
class ScopeMatch:
    """A layer scope a selector matched: its ``path`` and the ``ops`` recorded inside it (graph order).

    Equal (and hashed) by path.

    Example:
        >>> conv = ng.select(loss, "Conv")[0]
        >>> conv.name, conv.kind, len(conv.ops)
        ('conv1', 'Conv', 7)
    """

    path: tuple[ScopeEntry, ...]
    ops: tuple[Op, ...] = field(default=(), compare=False, repr=False)

    @property
    def name(self) -> str:
        """The innermost scope's name (a layer's name)."""
        return self.path[-1].name

    @property
    def kind(self) -> str:
        """The innermost scope's type (a layer's class name)."""
        return self.path[-1].kind

    def __str__(self) -> str:
        return path_text(self.path)


Item = Op | ScopeMatch


class TapHandle:
    """What ``Selection.tap`` returns: ``remove()`` takes that tap off every op it was put on.

    Also a context manager: the tap is removed on leaving the block.
    """

    def __init__(self, tap: _Tap, ops: list[Op]) -> None:
        self._tap = tap
        self.ops = tuple(ops)

    def remove(self) -> None:
        """Remove this tap (only this one: other taps of the same ops and function stay); idempotent."""
        for op in self.ops:
            taps = op.meta.attrs.get(TAP_ATTR, ())
            if any(t is self._tap for t in taps):
                rest = tuple(t for t in taps if t is not self._tap)
                update_meta(op, attrs={TAP_ATTR: rest or None})

    def __enter__(self) -> TapHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"<TapHandle on {len(self.ops)} op(s)>"


class _Tap:
    """One tap registration: a distinct object per ``tap()`` call, so ``remove`` takes out exactly it."""

    __slots__ = ("fn",)

    def __init__(self, fn: Tap) -> None:
        self.fn = fn

    def __call__(self, name: str, value: Any) -> None:
        self.fn(name, value)


class Selection:
    """The ops and layer scopes a query matched, in graph order, each once (immutable).

    Items are ``Op`` s and ``ScopeMatch`` es. Made by ``select``.

    Attributes:
        query: the query text.

    Example:
        >>> sel = ng.select(loss, "Conv > Pool variable")
        >>> sel.names, len(sel)
        (['W', 'b'], 2)
        >>> sel.freeze()
    """

    __slots__ = ("_items", "query", "_roots", "_index", "_op_set", "_scope_set")

    def __init__(self, items: Iterable[Item], query: str, roots: Iterable[Op], index: GraphIndex) -> None:
        self._items: tuple[Item, ...] = tuple(items)
        self.query = query
        self._roots = tuple(roots)
        self._index = index
        self._op_set = {item for item in self._items if isinstance(item, Op)}
        self._scope_set = {item.path for item in self._items if isinstance(item, ScopeMatch)}

    # -- list-like reading
    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items)

    def __getitem__(self, i: int | slice) -> Any:
        return self._items[i] if isinstance(i, int) else list(self._items[i])

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Op):
            return item in self._op_set
        return isinstance(item, ScopeMatch) and item.path in self._scope_set

    def __repr__(self) -> str:
        shown = ", ".join(self.names[:6]) + (", ..." if len(self) > 6 else "")
        return f"<Selection {self.query!r}: {len(self)} item(s) [{shown}]>"

    @property
    def roots(self) -> list[Op]:
        """The ops the selection was made from (the source's roots)."""
        return list(self._roots)

    @property
    def names(self) -> list[str]:
        """One name per item: an op's name (``op.name``: its own, or a generated ``<kind>_<id>``), a
        scope's path joined with ``/``."""
        return [item.name if isinstance(item, Op) else path_text(item.path) for item in self._items]

    @property
    def paths(self) -> list[str]:
        """One unambiguous name per item: an op's scope path then its name (for a variable, the key
        checkpoints use: ``Sequential_0/conv1/Convolution_0/W``), a scope's path.

        Example:
            >>> ng.select(model_ops, "#conv1 variable").paths
            ['Sequential_0/conv1/Convolution_0/W', 'Sequential_0/conv1/Bias_0/b']
        """
        return [path_text((*item.meta.scope, ScopeEntry(item.name))) if isinstance(item, Op) else path_text(item.path)
                for item in self._items]

    @property
    def ops(self) -> list[Op]:
        """Every op covered, in graph order, each once: the op items and every op inside the scope items."""
        positions: set[int] = set()
        for item in self._items:
            if isinstance(item, Op):
                positions.add(self._index.pos[item])
            else:
                positions.update(self._index.inside[item.path])
        return [self._index.order[i] for i in sorted(positions)]

    @property
    def variables(self) -> list[Op]:
        """The ``variable`` ops among ``ops``."""
        return [op for op in self.ops if op.op is OpType.VARIABLE]

    @property
    def outputs(self) -> list[Op]:
        """The ops ``tap`` and ``replace`` act on, in graph order: the op items, and each scope item's
        output ops (ops inside it read by an op outside it, or that are roots)."""
        index, roots = self._index, set(self._roots)
        chosen: set[int] = set()
        for item in self._items:
            if isinstance(item, Op):
                chosen.add(index.pos[item])
                continue
            depth = len(item.path)
            for i in index.inside[item.path]:
                if index.order[i] in roots or any(index.order[c].meta.scope[:depth] != item.path
                                                  for c in index.consumers[i]):
                    chosen.add(i)
        return [index.order[i] for i in sorted(chosen)]

    # -- mutation (all through ng.update_meta)
    def set(self, **attrs: Any) -> Selection:
        """Set meta attributes on every op of ``ops`` (scope items: every op inside); None removes one.

        Optimizers read ``lr_scale`` and ``weight_decay`` from variables.

        Returns:
            this selection.

        Raises:
            SelectorError: the ``tap`` attribute (use ``.tap(fn)``).
            InvalidNameError: an attribute name with control characters.

        Example:
            >>> ng.select(loss, "Conv variable").set(lr_scale=0.1, weight_decay=0)
        """
        if TAP_ATTR in attrs:
            raise SelectorError(f"selection {self.query!r}: .set({TAP_ATTR}=...): expected a data attribute, "
                                f"received the reserved {TAP_ATTR!r}; hint: use .tap(fn) to add a tap")
        for op in self.ops:
            update_meta(op, attrs=attrs)
        return self

    def freeze(self) -> list[Op]:
        """Stop training the variables of ``ops``: label ``trainable`` becomes ``frozen`` (optimizers skip them).

        Returns:
            the variables frozen now (those that were ``trainable``).

        Example:
            >>> ng.select(loss, "Conv > Pool variable").freeze()
        """
        chosen = [v for v in self.variables if "trainable" in v.meta.labels]
        for var in chosen:
            update_meta(var, remove_labels=("trainable",), add_labels=("frozen",))
        return chosen

    def unfreeze(self) -> list[Op]:
        """Train the frozen variables of ``ops`` again: ``frozen`` becomes ``trainable``.

        Returns:
            the variables unfrozen now (those that were ``frozen``).
        """
        chosen = [v for v in self.variables if "frozen" in v.meta.labels]
        for var in chosen:
            update_meta(var, remove_labels=("frozen",), add_labels=("trainable",))
        return chosen

    def tap(self, fn: Tap) -> TapHandle:
        """Call ``fn(name, array)`` with a NumPy copy of each ``outputs`` op's value every time a compiled
        computation holding that op runs (computations compiled earlier recompile).

        Args:
            fn: called with the op's name (``op.name``) and its value, after the run.

        Returns:
            a ``TapHandle``; ``handle.remove()`` takes this tap off again.

        Raises:
            SelectorError: ``fn`` is not callable.

        Example:
            >>> seen = {}
            >>> with ng.select(loss, "#conv1").tap(lambda name, a: seen.__setitem__(name, a)):
            ...     f(x)
        """
        if not callable(fn):
            raise SelectorError(f"selection {self.query!r}: .tap: expected a callable fn(name, array), "
                                f"received {type(fn).__name__}; hint: e.g. .tap(lambda name, a: print(name, a.shape))")
        tap, ops = _Tap(fn), self.outputs
        for op in ops:
            update_meta(op, attrs={TAP_ATTR: (*op.meta.attrs.get(TAP_ATTR, ()), tap)})
        return TapHandle(tap, ops)

    def replace(self, fn: Callable[[Op], Op]) -> list[Op]:
        """The roots rebuilt with each ``outputs`` op replaced by ``fn(op)``; the graph itself is unchanged.

        ``fn`` receives the op with its sources already rewritten (the op itself when nothing above it
        changed), and must return an op of the same axes and dtype.

        Returns:
            the new roots, one per ``roots`` entry, in order.

        Raises:
            SelectorError: ``fn`` returned something that is not an op, or a selected op lies inside a
                sub-graph (a scan or call body), which a rebuild of the roots cannot reach.
            AxesError / DTypeError: ``fn`` changed the axes or the dtype.

        Example:
            >>> (y2,) = ng.select(y, "relu").replace(lambda op: ng.tanh(op.src[0]))
        """
        targets = set(self.outputs)
        order = toposort(self._roots)
        hidden = targets - set(order)
        if hidden:
            raise SelectorError(
                f"selection {self.query!r}: .replace: expected ops of the top-level graph, received "
                f"{', '.join(sorted(op.name for op in hidden))} inside a sub-graph (scan or call body); "
                "hint: replace inside the body when building it")

        def swap(op: Op, cur: Op) -> Op:
            if op not in targets:
                return cur
            new = fn(cur)
            _check_replacement(self.query, cur, new)
            return new

        new = rebuild(order, swap)
        return [new[r] for r in self._roots]


def _check_replacement(query: str, old: Op, new: Any) -> None:
    where = f"selection {query!r}: .replace: fn({old.name})"
    if not isinstance(new, Op):
        raise SelectorError(f"{where}: expected an Op, received {type(new).__name__}; "
                            "hint: return a graph op built from the one given")
    if new.axes != old.axes:
        raise AxesError(f"{where}: expected an op with axes {format_axes(old.axes)}, received "
                        f"{format_axes(new.axes)}; hint: keep the replaced op's axes "
                        "(ng.axes_with_order, ng.broadcast)")
    if new.dtype != old.dtype:
        raise DTypeError(f"{where}: expected an op of dtype {old.dtype}, received {new.dtype}; hint: ng.cast it")


def tap_value(value: Any, to_numpy: Callable[[Any], Any]) -> Any:
    """The copy of a computed value a tap receives (None stays None: a ``doall`` has no value)."""
    return None if value is None else np.array(to_numpy(value), copy=True)


def _roots_of(source: Any) -> list[Op]:
    if isinstance(source, Op):
        return [source]
    if isinstance(source, Graph):
        return list(source.roots)
    results = getattr(source, "results", None)
    if isinstance(results, (tuple, list)):  # a compiled Computation
        source = results
    if isinstance(source, (str, bytes, Mapping)) or not isinstance(source, Iterable):
        raise SelectorError(f"select: expected an Op, a list of Ops, a Computation or a Graph, received "
                            f"{type(source).__name__}; hint: pass the ops you built, e.g. ng.select([loss], 'Conv')")
    roots = list(source)
    bad = [type(r).__name__ for r in roots if not isinstance(r, Op)]
    if bad:
        raise SelectorError(f"select: expected Ops, received {', '.join(sorted(set(bad)))} among the roots; "
                            "hint: pass graph ops (ng.Op)")
    return roots


def select(source: Any, query: str, *, scope_attrs: ScopeAttrs | None = None,
           unknown_types: str = "warn") -> Selection:
    """The ops and layer scopes of ``source``'s graph that ``query`` matches (docs/selectors.md).

    Args:
        source: an Op, an iterable of Ops, a compiled ``Computation`` (its results) or an
            ``ir.Graph`` (its roots); everything reachable from them is searched, sub-graph
            bodies included.
        query: e.g. ``"Conv > Pool variable"``, ``".elementwise:not(Conv *)"``, ``"#conv1"``.
        scope_attrs: optional ``(scope path) -> mapping`` giving a scope's attributes beyond
            ``name``, ``kind`` and ``path`` (neon passes layer configs, for ``Affine[nout=10]``).
        unknown_types: what to do about a Capitalized type no scope of the graph is or derives from
            (``"Afine variable"``: it selects nothing): ``"warn"`` (a ``SelectorWarning`` suggesting
            the closest types), ``"error"`` (a ``SelectorError``) or ``"ignore"``.

    Returns:
        a ``Selection``, in graph order.

    Raises:
        SelectorError: a malformed query (``.column`` points at it), an unusable ``source``, or
            (``unknown_types="error"``) a layer type that names nothing in the graph.

    Example:
        >>> ng.select(loss, "Conv > Pool variable").names
        ['W', 'b']
    """
    tree = parse(query)
    roots = _roots_of(source)
    index = GraphIndex(walk(roots), scope_attrs)
    check_layer_types(tree, index, query, unknown_types)
    items: list[Item] = []
    for item in Evaluator(index).run(tree):
        if isinstance(item, int):
            items.append(index.order[item])
        else:
            path: Path = item
            items.append(ScopeMatch(path, tuple(index.order[i] for i in index.inside[path])))
    return Selection(items, query, roots, index)
