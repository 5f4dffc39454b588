"""Checks of a parsed query against the graph it runs on: layer types that name nothing there.

A Capitalized type matches layer scopes by class (``ScopeEntry.is_a``), so a misspelt one
(``"Afine variable"``) is valid syntax that quietly selects nothing. ``check_layer_types`` finds
every such type, suggests the graph's closest types, and warns (``SelectorWarning``), raises
(``SelectorError``) or stays silent, as the caller of ``select`` chose.

Example:
    >>> check_layer_types(parse("Afine variable"), index, "Afine variable", "warn")
    SelectorWarning: select: "Afine variable": type Afine names no layer type of this graph ...; did you mean Affine?
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterator

from ..errors import SelectorError, SelectorWarning
from .match import GraphIndex
from .parser import Complex, Pseudo, SelectorList

UNKNOWN_TYPES = ("warn", "error", "ignore")  # what select does about a layer type the graph does not have


def layer_types(tree: SelectorList) -> Iterator[str]:
    """Every Capitalized (layer) type of the query, ``:not``/``:has`` arguments included, in query order."""
    stack: list[SelectorList] = [tree]
    while stack:
        for complex_ in stack.pop().selectors:
            for compound in _compounds(complex_):
                if compound.type is not None and compound.type[0].isupper():
                    yield compound.type
                stack.extend(t.arg for t in compound.tests if isinstance(t, Pseudo))


def _compounds(complex_: Complex) -> Iterator:
    yield complex_.first
    for _, compound in complex_.steps:
        yield compound


def graph_types(index: GraphIndex) -> list[str]:
    """The layer types a Capitalized query type can match in the graph: every scope's class and its bases."""
    return sorted({kind for path in index.inside for entry in path for kind in (entry.kind, *entry.kinds) if kind})


def check_layer_types(tree: SelectorList, index: GraphIndex, query: str, unknown_types: str = "warn") -> None:
    """Warn about (or refuse) each layer type of ``tree`` that no scope of the graph is or derives from.

    Args:
        tree: the parsed query.
        index: the graph's index (its scopes).
        query: the query text, for the message.
        unknown_types: ``"warn"`` (a ``SelectorWarning``), ``"error"`` (a ``SelectorError``) or ``"ignore"``.

    Raises:
        SelectorError: ``unknown_types="error"`` and a type names nothing; or an ``unknown_types``
            that is none of the three.
    """
    if unknown_types not in UNKNOWN_TYPES:
        raise SelectorError(f"select: expected unknown_types among {UNKNOWN_TYPES}, received {unknown_types!r}; "
                            "hint: 'error' refuses a layer type the graph does not have, 'warn' (default) warns")
    if unknown_types == "ignore":
        return
    known = graph_types(index)
    for name in dict.fromkeys(layer_types(tree)):
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        guess = f"did you mean {' or '.join(close)}? " if close else ""
        message = (f'select: "{query}": type {name} names no layer type of this graph, so it selects nothing there; '
                   f"{guess}the graph's layer types: {', '.join(known) or 'none (no layer scopes)'}; hint: "
                   "Capitalized types are layer classes, lowercase ones op kinds")
        if unknown_types == "error":
            raise SelectorError(message)
        warnings.warn(message, SelectorWarning, stacklevel=3)
