"""Op metadata: scope paths (which layer made an op), labels, attributes, and their change log.

``Meta`` is an immutable value: a name, a scope path, a frozenset of labels and a
read-only attribute map (``lr_scale``, ``weight_decay``... whatever selectors set).
It is not part of an op's structural identity (the scope is, through the op's
intern key), so changing it cannot go through a structural rewrite: equal structure
is the same object. Instead every change goes through one gate, ``node.update_meta``,
which swaps the op's ``Meta`` value and records *when* in a generation counter.
Compiled computations remember the generation they were compiled at and recompile
when an op of theirs changed since (``changed_since``).
"""

from __future__ import annotations

import contextvars
import itertools
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .names import check_name

# -- scopes -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScopeEntry:
    """One level of a scope path: the layer's name, its type, and the types it derives from.

    Args:
        name: the layer's name, relative to its parent (``Conv_0``).
        kind: its class name (``Conv``).
        kinds: its class hierarchy, most derived first (``("Conv", "LayerStack", "Layer")``),
            so a selector for a base class matches subclasses.

    Example:
        >>> ScopeEntry("block1", "ResidualBlock", ("ResidualBlock", "Layer")).is_a("Layer")
        True
    """

    name: str
    kind: str = ""
    kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_name(self.name, "scope name")
        if self.kind:
            check_name(self.kind, f"scope {self.name!r} kind")
        if not isinstance(self.kinds, tuple):
            object.__setattr__(self, "kinds", tuple(self.kinds))
        for k in self.kinds:
            check_name(k, f"scope {self.name!r} class")

    def is_a(self, kind: str) -> bool:
        """True when this level's type is ``kind`` or derives from it."""
        return kind == self.kind or kind in self.kinds

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
def name_scope(name: str, kind: str = "", kinds: Iterable[str] = ()) -> Iterator[Scope]:
    """Record the ops created inside in a nested scope ``name`` of type ``kind``.

    Args:
        name: the scope's name (a layer's name relative to its parent).
        kind: its type (a layer's class name); default ``name``.
        kinds: the type's hierarchy, most derived first (see ``ScopeEntry``).

    Raises:
        InvalidNameError: a name or kind with control characters.

    Example:
        >>> with name_scope("Conv_0", kind="Conv"):
        ...     pass  # ops built here have meta.scope == (..., ScopeEntry("Conv_0", "Conv"))
    """
    token = _scope_var.set(_scope_var.get() + (ScopeEntry(name, kind or name, tuple(kinds)),))
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


# -- the metadata value ------------------------------------------------------------------------


_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Meta:
    """Metadata of an op (immutable): ``name``, ``scope``, ``labels`` (frozenset), ``attrs`` (read-only map)."""

    __slots__ = ("name", "scope", "labels", "attrs")

    name: str | None
    scope: Scope
    labels: frozenset[str]
    attrs: Mapping[str, Any]

    def __init__(self, name: str | None = None, scope: Scope = (), labels: Iterable[str] = (),
                 attrs: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "scope", tuple(scope))
        object.__setattr__(self, "labels", frozenset(labels))
        object.__setattr__(self, "attrs", MappingProxyType(dict(attrs)) if attrs else _EMPTY)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Meta is immutable; change it with ng.update_meta(op, {key}=...)")

    def replace(self, **changes: Any) -> Meta:
        """A copy with some fields changed."""
        fields = {"name": self.name, "scope": self.scope, "labels": self.labels, "attrs": self.attrs}
        fields.update(changes)
        return Meta(**fields)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Meta) and (self.name, self.scope, self.labels, dict(self.attrs)) == (
            other.name, other.scope, other.labels, dict(other.attrs))

    __hash__ = None  # type: ignore[assignment]  # attrs may hold unhashable values

    def __repr__(self) -> str:
        attrs = f", attrs={dict(self.attrs)}" if self.attrs else ""
        return (f"Meta(name={self.name!r}, scope={'/'.join(map(str, self.scope))!r}, "
                f"labels={sorted(self.labels)}{attrs})")


# -- the change log ----------------------------------------------------------------------------

_generation = itertools.count(1)
_current = 0
_changed_at: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def meta_generation() -> int:
    """A counter that grows with every metadata change (0 before the first)."""
    return _current


def record_change(op: Any) -> None:
    """Note that ``op``'s metadata changed now (called by ``update_meta`` only)."""
    global _current
    _current = next(_generation)
    _changed_at[op] = _current


def changed_since(ops: Iterable[Any], generation: int) -> list[Any]:
    """The ops among ``ops`` whose metadata changed after ``generation``."""
    if _current <= generation:
        return []
    return [op for op in ops if _changed_at.get(op, 0) > generation]
