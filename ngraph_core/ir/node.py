"""``Op``: the one node type of the IR, the one gate for metadata changes, graph walks, and ``format_op``
(an op as one line of text, ``Op.__repr__``; ``printer.format_graph`` prints a whole graph with it).

Construction is hash-consed: building an op whose structure (op, src, axes, dtype,
arg, scope) equals a live op returns that same object, so equal structure is
identity (free CSE; rules compare with ``is``). Variables, placeholders and random
ops carry a unique id in ``arg`` so that two of them are never merged.

``meta`` (name, scope, labels) rides along; the scope is part of identity, the name
and labels are not (two constructions of one structure share one meta, whose labels
are the union).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from .axes import Axes
from .meta import Meta, Scope, current_labels, current_scope, record_change
from .names import check_name
from .ops import OpGroup, OpType

# -- the node ---------------------------------------------------------------------------


_interned: weakref.WeakValueDictionary[tuple, Op] = weakref.WeakValueDictionary()
_intern_lock = threading.Lock()


class Op:
    """The one node type: ``op`` (an OpType), ``src`` (input ops), ``axes``, ``dtype``, ``arg``, ``meta``.

    Ops are immutable and hash-consed; construct them through ``ngraph_core``'s API
    (which validates axes and dtypes) rather than directly.

    Args:
        op: what the node computes.
        src: its inputs, in order.
        axes: the axes of its value.
        dtype: numpy dtype name of its value (``"float32"``...).
        arg: op-specific hashable data.
        name: optional user-visible name (not part of identity).
        labels: free labels such as ``weight`` or ``trainable`` (not part of identity).
        scope: scope path; by default the current ``name_scope``.
    """

    __slots__ = ("op", "src", "axes", "dtype", "arg", "meta", "__weakref__")

    op: OpType
    src: tuple[Op, ...]
    axes: Axes
    dtype: str
    arg: Any
    meta: Meta

    def __new__(
        cls,
        op: OpType,
        src: Iterable[Op] = (),
        axes: Iterable[Any] = (),
        dtype: str = "float32",
        arg: Any = None,
        *,
        name: str | None = None,
        labels: Iterable[str] = (),
        scope: Scope | None = None,
    ) -> Op:
        src = tuple(src)
        axes = Axes(axes)
        scope = current_scope() if scope is None else tuple(scope)
        labels = set(labels)
        if name is not None:
            check_name(name, f"{op.value} name")
        for label in labels:
            check_name(label, f"{op.value} label")
        # 0.0 == -0.0 (and they hash alike), but they are different constants (1/x differs)
        key_arg = (arg, math.copysign(1.0, arg)) if type(arg) is float else arg
        key = (op, src, axes, dtype, key_arg, scope)
        with _intern_lock:
            hit = _interned.get(key)
            if hit is None:
                hit = object.__new__(cls)
                for field, value in zip(("op", "src", "axes", "dtype", "arg"), (op, src, axes, dtype, arg)):
                    object.__setattr__(hit, field, value)
                # context labels (e.g. ``grad`` during the backward walk) mark new ops only: an op
                # the forward pass already built stays a forward op
                object.__setattr__(hit, "meta", Meta(name, scope, labels | current_labels()))
                _interned[key] = hit
                return hit
        # the same structure built again: its labels join the op's, a name fills an unnamed op
        if not labels <= hit.meta.labels or (name is not None and hit.meta.name is None):
            _set_meta(hit, hit.meta.replace(labels=hit.meta.labels | labels, name=hit.meta.name or name))
        return hit

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Op is immutable; cannot set {key!r}")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Op is immutable; cannot delete {key!r}")

    def __reduce__(self) -> Any:
        raise TypeError("Ops are not picklable; use ngraph_core.serialize(ops) instead")

    def __copy__(self) -> Op:
        return self

    def __deepcopy__(self, memo: dict) -> Op:
        return self

    # -- convenience ------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The user's name for this op, or a generated ``<op>_<id>``."""
        return self.meta.name or f"{self.op.value}_{id(self) % 100000}"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.axes.lengths

    def named(self, name: str) -> Op:
        """Set this op's name (metadata only, through ``update_meta``) and return the op."""
        return update_meta(self, name=name)

    def labeled(self, *labels: str) -> Op:
        """Add labels (metadata only, through ``update_meta``) and return the op."""
        return update_meta(self, add_labels=labels)

    def replace(self, **changes: Any) -> Op:
        """The op with some structural fields changed, keeping meta (name, labels, scope)."""
        fields = {"op": self.op, "src": self.src, "axes": self.axes, "dtype": self.dtype, "arg": self.arg}
        fields.update(changes)
        return Op(**fields, name=self.meta.name, labels=self.meta.labels, scope=self.meta.scope)

    def variables(self) -> list[Op]:
        """The variables this op depends on, in topological order."""
        return [o for o in toposort([self]) if o.op is OpType.VARIABLE]

    def placeholders(self) -> list[Op]:
        """The placeholders this op depends on, in topological order."""
        return [o for o in toposort([self]) if o.op is OpType.PLACEHOLDER]

    def __repr__(self) -> str:
        return format_op(self)

    def __bool__(self) -> bool:
        raise TypeError(
            f"The truth value of a graph op ({self.op.value}) is not known until it runs; "
            "hint: use ng.where / comparisons inside the graph, or compare ops with `is`"
        )


def _set_meta(op: Op, meta: Meta) -> None:
    object.__setattr__(op, "meta", meta)
    record_change(op)


def update_meta(op: Op, *, name: str | None = None, add_labels: Iterable[str] = (),
                remove_labels: Iterable[str] = (), attrs: dict[str, Any] | None = None) -> Op:
    """The one way to change an op's metadata; returns ``op``.

    Metadata is not structure (equal structure is one object), so this swaps the op's
    immutable ``Meta`` value instead of rebuilding the graph, and logs the change:
    computations compiled before it recompile on their next call.

    Args:
        op: the op to annotate.
        name: a new name.
        add_labels / remove_labels: labels to add or remove (``trainable``, ``frozen``...).
        attrs: attributes to set (``{"lr_scale": 0.1}``); a value of None removes the key.

    Returns:
        ``op`` itself.

    Raises:
        InvalidNameError: a name or label with control characters.

    Example:
        >>> update_meta(W, remove_labels=["trainable"], attrs={"lr_scale": 0.0})
    """
    meta = op.meta
    new_name = meta.name if name is None else check_name(name, f"{op.op.value} name")
    add = frozenset(check_name(label, f"{op.op.value} label") for label in add_labels)
    labels = (meta.labels | add) - frozenset(remove_labels)
    new_attrs = dict(meta.attrs)
    for key, value in (attrs or {}).items():
        check_name(key, f"{op.op.value} attribute")
        if value is None:
            new_attrs.pop(key, None)
        else:
            new_attrs[key] = value
    new = meta.replace(name=new_name, labels=labels, attrs=new_attrs)
    if new != meta:
        _set_meta(op, new)
    return op


def owns_buffer(op: Op) -> bool:
    """True when ``op``'s value needs a buffer of its own (its kernel is called as ``kernel(out, *inputs)``)."""
    return op.op not in OpGroup.NO_BUFFER


# -- graph walks ----------------------------------------------------------------------------


def toposort(roots: Iterable[Op]) -> list[Op]:
    """Every op reachable from ``roots``, each after its sources (iterative DFS post-order)."""
    order: list[Op] = []
    done: set[int] = set()
    for root in roots:
        if id(root) in done:
            continue
        stack: list[tuple[Op, int]] = [(root, 0)]
        on_path = {id(root)}
        while stack:
            node, i = stack[-1]
            if i < len(node.src):
                stack[-1] = (node, i + 1)
                child = node.src[i]
                if id(child) not in done:
                    assert id(child) not in on_path, "cycle in graph"
                    stack.append((child, 0))
                    on_path.add(id(child))
            else:
                stack.pop()
                on_path.discard(id(node))
                if id(node) not in done:
                    done.add(id(node))
                    order.append(node)
    return order


def consumers(ops: Iterable[Op]) -> dict[Op, list[Op]]:
    """For each op, the ops that take it as a source (in the given order)."""
    users: dict[Op, list[Op]] = {op: [] for op in ops}
    for op in users:
        for s in op.src:
            if s in users and op not in users[s]:
                users[s].append(op)
    return users


Rewrite = Callable[[Op, Op], Op]


def rebuild(order: Iterable[Op], fn: Rewrite | None = None, new: dict[Op, Op] | None = None) -> dict[Op, Op]:
    """Walk ``order`` (sources first) and give every op its rewritten version; the one rebuild loop.

    For each ``op``, ``cur`` is ``op`` with its sources replaced by their rewrites (``op``
    itself when none changed; meta is kept); ``fn(op, cur)`` then returns what ``op``
    becomes (``cur`` to keep it). Every pass that rewrites a graph goes through here.

    Args:
        order: ops in topological order (``toposort(roots)``).
        fn: the per-op rewrite; None keeps ``cur``.
        new: the mapping to fill (pass your own to read earlier rewrites inside ``fn``).

    Returns:
        the mapping: original op -> its rewrite.

    Example:
        >>> new = rebuild(toposort(roots), lambda op, cur: two if cur is one else cur)
        >>> roots = [new[r] for r in roots]
    """
    new = {} if new is None else new
    for op in order:
        src = tuple(new[s] for s in op.src)
        cur = op if src == op.src else op.replace(src=src)
        new[op] = cur if fn is None else fn(op, cur)
    return new


def substitute(roots: Iterable[Op], mapping: dict[Op, Op] | Callable[[Op], Op | None]) -> list[Op]:
    """Rebuild ``roots`` with some ops replaced; everything above a replacement is rebuilt.

    ``mapping`` is a dict or a function returning a replacement or None. Rebuilt ops
    keep their meta (name, scope, labels).
    """
    roots = list(roots)
    lookup = mapping.get if isinstance(mapping, dict) else mapping
    def replace(op: Op, cur: Op) -> Op:
        replacement = lookup(op)
        return cur if replacement is None else replacement

    new = rebuild(toposort(roots), replace)
    return [new[r] for r in roots]


# -- text ------------------------------------------------------------------------------


def _arg_text(op: Op) -> str:
    if op.arg is None or op.op in (OpType.PLACEHOLDER,):
        return ""
    return f" {{{op.arg!r}}}"


def _meta_text(op: Op) -> str:
    parts = []
    if op.meta.name:
        parts.append(op.meta.name)
    if op.meta.scope:
        parts.append("in " + "/".join(str(s) for s in op.meta.scope))
    if op.meta.labels:
        parts.append("." + ".".join(sorted(op.meta.labels)))
    return f"  # {' '.join(parts)}" if parts else ""


def format_op(op: Op, names: dict[Op, str] | None = None) -> str:
    """One line for ``op``; sources are shown by ``names`` (default: their op names)."""
    names = names or {}
    src = ", ".join(names.get(s, f"<{s.op.value}>") for s in op.src)
    call = f"{op.op.value}({src})" if op.src else op.op.value
    return f"{call}{_arg_text(op)} {op.axes} {op.dtype}{_meta_text(op)}"
