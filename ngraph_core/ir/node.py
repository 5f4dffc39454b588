"""``Op``: the one node type of the IR, its metadata, scopes and graph walks.

Construction is hash-consed: building an op whose structure (op, src, axes, dtype,
arg, scope) equals a live op returns that same object, so equal structure is
identity (free CSE; rules compare with ``is``). Variables, placeholders and random
ops carry a unique id in ``arg`` so that two of them are never merged.

``meta`` (name, scope, labels) rides along; the scope is part of identity, the name
and labels are not (two constructions of one structure share one meta, whose labels
are the union).
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import math
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .axes import Axes
from .names import check_name
from .ops import OpGroup, OpType

_uids = itertools.count()


def next_uid() -> int:
    """A process-unique integer for ops that must never be merged (variables, placeholders)."""
    return next(_uids)


# -- scopes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScopeEntry:
    """One level of a scope path: the layer's name and its type (class name)."""

    name: str
    kind: str = ""

    def __post_init__(self) -> None:
        check_name(self.name, "scope name")
        if self.kind:
            check_name(self.kind, f"scope {self.name!r} kind")

    def __str__(self) -> str:
        return self.name


Scope = tuple[ScopeEntry, ...]

_scope_var: contextvars.ContextVar[Scope] = contextvars.ContextVar("ng_scope", default=())
_labels_var: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("ng_labels", default=frozenset())


def current_scope() -> Scope:
    """The scope path ops created now are recorded in."""
    return _scope_var.get()


def current_labels() -> frozenset[str]:
    """Labels added to every op created now (e.g. ``grad`` during the backward walk)."""
    return _labels_var.get()


@contextmanager
def name_scope(name: str, kind: str = "") -> Iterator[Scope]:
    """Record the ops created inside in a nested scope ``name`` of type ``kind``.

    Example:
        >>> with name_scope("Conv_0", kind="Conv"):
        ...     pass  # ops built here have meta.scope == (..., ScopeEntry("Conv_0", "Conv"))
    """
    token = _scope_var.set(_scope_var.get() + (ScopeEntry(name, kind or name),))
    try:
        yield _scope_var.get()
    finally:
        _scope_var.reset(token)


@contextmanager
def scope_override(scope: Scope, labels: Iterable[str] = ()) -> Iterator[None]:
    """Create ops in ``scope`` (replacing the current one) with extra ``labels``."""
    labels = frozenset(check_name(label, "scope label") for label in labels)
    t1 = _scope_var.set(tuple(scope))
    t2 = _labels_var.set(_labels_var.get() | labels)
    try:
        yield
    finally:
        _labels_var.reset(t2)
        _scope_var.reset(t1)


# -- op arguments that need care to be hashable ----------------------------------------


class ArrayValue:
    """An immutable, hashable array held in ``arg`` of a constant.

    Hash and equality use dtype, shape and bytes, so two equal constants hash-cons
    to one op.
    """

    __slots__ = ("array", "_digest")

    def __init__(self, value: Any, dtype: str | None = None) -> None:
        array = np.array(value, dtype=dtype, copy=True, order="C")
        array.flags.writeable = False
        object.__setattr__(self, "array", array)
        digest = hashlib.blake2b(array.tobytes(), digest_size=16).digest()
        object.__setattr__(self, "_digest", (str(array.dtype), array.shape, digest))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("ArrayValue is immutable")

    def __hash__(self) -> int:
        return hash(self._digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArrayValue) and self._digest == other._digest

    def __repr__(self) -> str:
        flat = self.array.ravel()
        body = ", ".join(f"{v:g}" if self.array.dtype.kind == "f" else str(v) for v in flat[:4])
        more = ", ..." if flat.size > 4 else ""
        return f"array({body}{more}; shape={self.array.shape})"


class VariableInfo:
    """``arg`` of a variable: its unique id and how to initialise it.

    ``initial_value`` is a number, an array, or a callable ``(axes) -> array``.
    Equality and hash use the id alone.
    """

    __slots__ = ("uid", "initial_value")

    def __init__(self, uid: int, initial_value: Any) -> None:
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "initial_value", initial_value)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("VariableInfo is immutable")

    def __hash__(self) -> int:
        return hash(("var", self.uid))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableInfo) and other.uid == self.uid

    def __repr__(self) -> str:
        return f"var#{self.uid}"


@dataclass(frozen=True, slots=True)
class RandomInfo:
    """``arg`` of a random op: unique id, the two distribution parameters and an optional seed."""

    uid: int
    a: float
    b: float
    seed: int | None = None


# -- the node ---------------------------------------------------------------------------


class Meta:
    """Metadata carried by an op: a name, the scope path that created it, free labels."""

    __slots__ = ("name", "scope", "labels")

    def __init__(self, name: str | None = None, scope: Scope = (), labels: Iterable[str] = ()) -> None:
        self.name = name
        self.scope = tuple(scope)
        self.labels = set(labels)

    def __repr__(self) -> str:
        return f"Meta(name={self.name!r}, scope={'/'.join(map(str, self.scope))!r}, labels={sorted(self.labels)})"


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
        hit.meta.labels |= labels
        if name is not None and hit.meta.name is None:
            hit.meta.name = name
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
        """Set this op's name (metadata only) and return the op."""
        self.meta.name = check_name(name, f"{self.op.value} name")
        return self

    def labeled(self, *labels: str) -> Op:
        """Add labels (metadata only) and return the op."""
        self.meta.labels.update(check_name(label, f"{self.op.value} label") for label in labels)
        return self

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
        from .printer import format_op  # printer reads Op; imported late to keep the cycle out

        return format_op(self)

    def __bool__(self) -> bool:
        raise TypeError(
            f"The truth value of a graph op ({self.op.value}) is not known until it runs; "
            "hint: use ng.where / comparisons inside the graph, or compare ops with `is`"
        )


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


def substitute(roots: Iterable[Op], mapping: dict[Op, Op] | Callable[[Op], Op | None]) -> list[Op]:
    """Rebuild ``roots`` with some ops replaced; everything above a replacement is rebuilt.

    ``mapping`` is a dict or a function returning a replacement or None. Rebuilt ops
    keep their meta (name, scope, labels).
    """
    lookup = mapping.get if isinstance(mapping, dict) else mapping
    new: dict[Op, Op] = {}
    for op in toposort(roots):
        src = tuple(new[s] for s in op.src)
        replacement = lookup(op)
        if replacement is not None:
            new[op] = replacement
        elif src != op.src:
            new[op] = op.replace(src=src)
        else:
            new[op] = op
    return [new[r] for r in roots]
